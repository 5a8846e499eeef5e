"""The pre-registration record: what it freezes, that it cannot be silently overwritten, and the per-claim hash
check that marks a claim edited or added after it as post hoc."""

from __future__ import annotations

import datetime as dt
import os
from pathlib import Path

import pytest
import yaml
from tiny_paper import REPO, own_profiles, paper_root  # noqa: F401  (paper_root: the fixture)

from distrepro.claims.certification import check_claims
from distrepro.claims.preregistration import (
    CONFIRMATORY_FIRST_SEED,
    build_record,
    claim_hash,
    exploratory_seeds,
    load_record,
    preregister,
    record_path,
    write_record,
)
from distrepro.claims.schema import at_scale, load_paper_file
from distrepro.errors import ConfigError

PAPER = {
    "kind": "reproduction",
    "citation": {"id": "prereg", "title": "A paper to register"},
    "setup": {"scale": "proxy", "min_seeds": 3, "baseline": "base"},
    "claims": [
        {
            "id": "better",
            "kind": "ordering",
            "arms": ["new", "base"],
            "metric": "final/val_accuracy",
            "direction": "max",
            "margin": 0.005,
            "source": {"kind": "text", "quote": "better"},
            "evidence": "reconstructed",
            "notes": "half the paper's 1-point gap",
            "regime": [
                {
                    "id": "long",
                    "what": "long enough",
                    "metric": "final/steps",
                    "arm": "base",
                    "at_least": 100,
                    "source": "ours",
                }
            ],
        },
        {
            "id": "faster",
            "kind": "speedup",
            "arm": "new",
            "baseline": "base",
            "claimed": 2.0,
            "accept": {"rel_tolerance": 0.1},
            "source": {"kind": "abstract", "quote": "twice as fast"},
            "evidence": "verbatim",
        },
    ],
}
NOW = dt.datetime(2026, 11, 27, 1, 0, tzinfo=dt.UTC)


def _write(path: Path, data: dict) -> Path:
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


@pytest.fixture
def paper_file(tmp_path: Path) -> Path:
    (tmp_path / "prereg").mkdir()
    return _write(tmp_path / "prereg" / "paper.yaml", PAPER)


def _record(paper_file: Path, **kw) -> dict:
    spec = at_scale(load_paper_file(paper_file), "proxy")
    return build_record("prereg", paper_file, spec, "proxy", kw.pop("seeds", [100, 101, 102]), now=NOW, **kw)


@pytest.mark.smoke
def test_record_freezes_hashes_margins_seeds_and_regime(paper_file: Path) -> None:
    rec = _record(paper_file)
    assert rec["date"] == "2026-11-27T01:00:00Z" and rec["scale"] == "proxy" and rec["n"] == 3
    assert rec["seeds"] == [100, 101, 102] and rec["sequential"] == {"design": "fixed", "n": 3, "interval": 0.95}
    assert len(rec["claims_sha256"]) == 64
    better = rec["claims"]["better"]
    assert better["margin"] == 0.005 and better["min_seeds"] == 3
    assert better["regime"]["long"]["at_least"] == 100
    assert better["sha256"] == claim_hash(PAPER["claims"][0])
    assert rec["claims"]["faster"]["claimed"] == 2.0


def test_a_declared_sequential_plan_carries_its_level(paper_file: Path) -> None:
    rec = _record(paper_file, seeds=list(range(100, 110)), looks=[5, 10])
    assert rec["sequential"]["design"] == "pocock"
    assert rec["sequential"]["boundary_z"] == pytest.approx(2.178, abs=0.003)
    assert 0.970 < rec["sequential"]["interval"] < 0.971
    with pytest.raises(ConfigError, match="last look"):
        _record(paper_file, seeds=list(range(100, 110)), looks=[5, 8])


def test_a_record_is_frozen_unless_replaced(paper_file: Path) -> None:
    path = record_path(paper_file, "proxy")
    write_record(_record(paper_file), path)
    assert load_record(path)["claims"]["better"]["margin"] == 0.005
    with pytest.raises(ConfigError, match="already registered"):
        write_record(_record(paper_file), path)
    write_record(_record(paper_file, seeds=[100, 101, 102, 103]), path, replace=True)
    assert load_record(path)["n"] == 4
    assert load_record(path.with_name("mid.yaml")) is None


def test_a_record_missing_a_field_is_a_clear_error(paper_file: Path) -> None:
    path = record_path(paper_file, "proxy")
    path.parent.mkdir()
    path.write_text("paper: prereg\nscale: proxy\n")
    with pytest.raises(ConfigError, match="date"):
        load_record(path)


def test_hash_check_marks_edited_and_added_claims_post_hoc(paper_file: Path) -> None:
    rec = _record(paper_file)
    ids = ["better", "faster"]
    assert [s.status for s in check_claims(rec, paper_file, ids)] == ["registered", "registered"]
    edited = yaml.safe_load(paper_file.read_text())
    edited["claims"][0]["margin"] = 0.0  # a margin lowered after the runs
    edited["claims"].append({**edited["claims"][1], "id": "new-one"})
    _write(paper_file, edited)
    statuses = {s.claim_id: s for s in check_claims(rec, paper_file, [*ids, "new-one"])}
    assert statuses["better"].status == "edited after registration" and statuses["better"].post_hoc
    assert statuses["faster"].status == "registered" and not statuses["faster"].post_hoc
    assert statuses["new-one"].status == "added after registration"


def test_documenting_a_claim_does_not_make_it_post_hoc(paper_file: Path) -> None:
    rec = _record(paper_file)
    edited = yaml.safe_load(paper_file.read_text())
    edited["claims"][0]["notes"] = "reworded"
    edited["claims"][0]["post_hoc"] = ["a documented choice"]
    _write(paper_file, edited)
    assert not check_claims(rec, paper_file, ["better"])[0].post_hoc


def test_seeds_outside_the_record_are_exploratory(paper_file: Path) -> None:
    rec = _record(paper_file)
    assert exploratory_seeds(rec, [100, 101, 102]) == []
    assert exploratory_seeds(rec, [0, 1, 100, 4]) == [0, 1, 4]


def test_preregister_command_writes_beside_the_paper_from_seed_100(paper_root: Path) -> None:  # noqa: F811
    path, rec = preregister("tinypaper", "proxy")
    assert path == paper_root / "methods" / "tiny" / "preregistration" / "proxy.yaml"
    assert rec["seeds"] == [CONFIRMATORY_FIRST_SEED, CONFIRMATORY_FIRST_SEED + 1]  # tiny.yaml runs 2 seeds
    assert set(load_record(path)["claims"]) == {"fewer-bytes"}
    assert path.read_text().startswith("# Pre-registration of tinypaper at proxy scale")


def test_committed_records_load_and_name_claims_of_their_paper() -> None:
    root = Path(__file__).resolve().parents[2]
    records = sorted(root.glob("methods/*/preregistration/*.yaml"))
    assert records, "the reproductions' records are committed beside their paper.yaml"
    for path in records:
        rec = load_record(path)
        assert rec is not None and rec["scale"] == path.stem
        assert min(rec["seeds"]) >= CONFIRMATORY_FIRST_SEED  # confirmatory seeds never run before
        ids = {c["id"] for c in yaml.safe_load((path.parent.parent / "paper.yaml").read_text())["claims"]}
        assert set(rec["claims"]) <= ids, path


def test_cli_parses_seed_ranges_and_refuses_a_second_record(paper_root: Path, capsys) -> None:  # noqa: F811
    from distrepro.cli import main

    assert main(["preregister", "tinypaper", "--scale", "proxy", "--seeds", "100-102,110"]) == 0
    out = capsys.readouterr().out
    assert "registered 1 claims of tinypaper at proxy scale" in out and "--seeds 100,101,102,110" in out
    path = paper_root / "methods" / "tiny" / "preregistration" / "proxy.yaml"
    assert load_record(path)["seeds"] == [100, 101, 102, 110]
    assert main(["preregister", "tinypaper", "--scale", "proxy"]) == 2
    assert "already registered" in capsys.readouterr().err
    again = ["preregister", "tinypaper", "--scale", "proxy", "--looks", "2,4", "--seeds", "100-103", "--replace"]
    assert main(again) == 0
    assert load_record(path)["sequential"]["design"] == "pocock"


def _tiny_record(root: Path, **kw) -> tuple[Path, dict, object]:
    from distrepro.claims.papers import find_paper
    from distrepro.claims.preregistration import preregister

    path, record = preregister("tinypaper", "proxy", **{"seeds": [0, 1], "root": root, **kw})
    info = find_paper("tinypaper", root)
    return path, record, info


def _standing_now(root: Path, record: dict, info, first_run=None, samples=None):  # type: ignore[no-untyped-def]
    from distrepro.claims.certification import standing
    from distrepro.claims.preregistration import frozen_now

    spec = at_scale(info.spec, "proxy")
    now = frozen_now(info.path, spec, "proxy", root)
    return standing(record, check_claims(record, info.path, ["fewer-bytes"]), now, first_run, samples)


def test_a_record_freezes_every_input_that_decides_a_verdict(paper_root: Path) -> None:  # noqa: F811
    """paper.yaml with its setup, each arm config, each profile the arms use, the error band, the emulator and claims
    code (one digest), the hardware samples, and the full commit with its dirty state."""
    from distrepro.claims.frozen import BANDS, CODE, CONFIGS, PAPER, PROFILES, TRAINING, TRAINING_NAME

    _, record, _ = _tiny_record(paper_root, samples=16)
    inputs = record["frozen"]["inputs"]
    assert list(inputs["paper.yaml"]) == ["methods/tiny/paper.yaml"]
    assert list(inputs[CONFIGS]) == ["methods/tiny/tiny.yaml"]
    assert list(inputs[PROFILES]) == ["hardware_profiles/hetero-2fast-2slow.yaml"]
    assert list(inputs[BANDS]) == ["hardware_profiles/validation/emulator_error.yaml"]
    assert len(next(iter(inputs[CODE].values()))) == 64 and PAPER in inputs
    # the re-implementation the arms train with: the paper's folder, the method the config names (ar_sgd, not the
    # unused local_sgd beside it), the dataset it defaults to, and the plugin API and training packages
    assert sorted(inputs[TRAINING]) == [
        "datasets/synthetic.py",
        TRAINING_NAME,
        "methods/ar_sgd/method.py",
        "methods/tiny/method.py",
    ]
    assert record["frozen"]["samples"] == 16
    assert "commit" in record["frozen"] and "dirty" in record["frozen"]


def test_a_verdict_is_post_hoc_when_an_input_changed_the_record_is_late_or_replaced(paper_root: Path) -> None:  # noqa: F811
    path, record, info = _tiny_record(paper_root)
    assert _standing_now(paper_root, record, info).post_hoc == {}  # nothing changed: the registered test
    registered = load_record(path)

    # narrowing a profile's bandwidth range after the runs: every verdict of the record is post hoc, naming the file
    profile = own_profiles(paper_root) / "hetero-2fast-2slow.yaml"
    profile.write_text(profile.read_text() + "\n# a range narrowed\n")
    st = _standing_now(paper_root, registered, info)
    assert "hardware profiles: `hardware_profiles/hetero-2fast-2slow.yaml` changed" in st.post_hoc["fewer-bytes"]
    profile.write_text(profile.read_text().replace("\n# a range narrowed\n", ""))

    # the setup: block counts too (not only the claims)
    paper = info.path
    paper.write_text(paper.read_text().replace("min_seeds: 2", "min_seeds: 3"))
    assert (
        "paper.yaml: `methods/tiny/paper.yaml` changed"
        in _standing_now(paper_root, registered, info).post_hoc["fewer-bytes"]
    )
    paper.write_text(paper.read_text().replace("min_seeds: 3", "min_seeds: 2"))

    # the method's code edited after the runs: a FAIL could now be about other code than the one that ran
    method = paper_root / "methods" / "tiny" / "method.py"
    method.unlink()  # a link to a shipped method: replace it by an edited copy
    method.write_text((REPO / "methods" / "local_sgd" / "method.py").read_text() + "\n# edited after the runs\n")
    assert (
        "method and training code: `methods/tiny/method.py` changed"
        in _standing_now(paper_root, registered, info).post_hoc["fewer-bytes"]
    )
    method.unlink()
    os.symlink(REPO / "methods" / "local_sgd" / "method.py", method)
    assert _standing_now(paper_root, registered, info).post_hoc == {}

    # another number of hardware samples than the record's
    assert "hardware samples" in _standing_now(paper_root, registered, info, samples=99).post_hoc["fewer-bytes"]

    # a record newer than the first confirmatory run it judges
    early = dt.datetime(2020, 1, 1, tzinfo=dt.UTC)
    assert (
        "newer than the first confirmatory run"
        in _standing_now(paper_root, registered, info, early).post_hoc["fewer-bytes"]
    )

    # --replace after the runs: the history stays in the record, and the verdicts are post hoc
    _, replaced, _ = _tiny_record(paper_root, replace=True)
    assert replaced["replaced"][0]["registered"] == registered["date"]
    assert "replaced an earlier one" in _standing_now(paper_root, load_record(path), info).post_hoc["fewer-bytes"]


def test_a_replacement_on_fresh_seeds_is_a_new_test_on_the_same_seeds_post_hoc(paper_root: Path) -> None:  # noqa: F811
    """Replacing a record on seeds none of its predecessors registered is a new confirmatory test (the earlier runs
    its pilot): a note, not post hoc; replacing it again on seeds an earlier record used is post hoc."""
    from distrepro.claims.certification import fresh_replacement

    path, _, info = _tiny_record(paper_root)
    _, fresh, _ = _tiny_record(paper_root, replace=True, seeds=[200, 201])
    assert fresh["replaced"][0]["seeds"] == [0, 1] and fresh_replacement(load_record(path))
    st = _standing_now(paper_root, load_record(path), info)
    assert st.post_hoc == {} and "new confirmatory test" in st.notes[0]
    # a record dated after the first run on its own seeds stays post hoc, fresh seeds or not
    early = dt.datetime(2020, 1, 1, tzinfo=dt.UTC)
    assert "newer than" in _standing_now(paper_root, load_record(path), info, early).post_hoc["fewer-bytes"]
    # back to seeds the first record registered: post hoc, the history says why
    _tiny_record(paper_root, replace=True, seeds=[1, 2])
    again = load_record(path)
    assert not fresh_replacement(again)
    assert "replaced an earlier one" in _standing_now(paper_root, again, info).post_hoc["fewer-bytes"]


def test_a_record_without_a_frozen_block_cannot_certify_the_inputs(paper_root: Path) -> None:  # noqa: F811
    _, record, info = _tiny_record(paper_root)
    old = {k: v for k, v in record.items() if k != "frozen"}
    st = _standing_now(paper_root, old, info)
    assert st.post_hoc == {} and "does not freeze setup, profiles, code" in st.not_frozen


# ---------------------------------------------------------------- seeds already run, and what a record cannot certify


def _log_runs(uri: str, seeds: list[int], scale: str = "proxy") -> dict[int, str]:
    """tinypaper runs logged by hand on ``seeds`` at ``scale``, before any record: seed → run id."""
    from distrepro.tracking.campaign_run import Campaign
    from distrepro.tracking.mlflow_client import experiment_name

    ids = {}
    tags = {"distrepro.paper": "tinypaper", "distrepro.campaign": "early"}
    with Campaign(experiment_name("tinypaper"), "early", tags, tracking_uri=uri, flush_every_s=None) as c:
        for seed in seeds:
            child = {"distrepro.method": "ar_sgd", "distrepro.seed": str(seed), "distrepro.scale": scale}
            with c.child(f"sync-s{seed}", {}, child) as run:
                run.log_summary({"comm/bytes_total": 2e6})
                ids[seed] = run.run_id
    return ids


def test_preregister_refuses_seeds_runs_already_used_unless_post_hoc(
    paper_root: Path,  # noqa: F811
    mlflow_uri: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """``preregister --seeds 0,1`` after runs on 0 and 1 would certify verdicts already seen: refused, naming the
    runs; a run at another scale does not count; ``--post-hoc`` registers them knowingly, and the record says so."""
    from distrepro.claims.certification import standing
    from distrepro.cli import main

    ran = _log_runs(mlflow_uri, [0, 1])
    _log_runs(mlflow_uri, [100], scale="mid")
    path = paper_root / "methods" / "tiny" / "preregistration" / "proxy.yaml"
    assert main(["preregister", "tinypaper", "--scale", "proxy", "--seeds", "0,1"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "seed(s) 0, 1 of tinypaper at proxy scale already ran" in err
    assert f"seed 0: run {ran[0][:12]} started 20" in err and f"seed 1: run {ran[1][:12]}" in err
    assert "--post-hoc" in err and not path.exists()

    assert main(["preregister", "tinypaper", "--scale", "proxy", "--seeds", "100,101"]) == 0  # mid's 100 is apart
    assert "post_hoc_seeds" not in load_record(path) and "post hoc" not in capsys.readouterr().out

    again = ["preregister", "tinypaper", "--scale", "proxy", "--seeds", "0,1", "--replace", "--post-hoc"]
    assert main(again) == 0
    assert "note: registered post hoc: runs already used seed(s) 0, 1" in capsys.readouterr().out
    record = load_record(path)
    assert [(u["seed"], u["run"]) for u in record["post_hoc_seeds"]] == [(0, ran[0]), (1, ran[1])]
    reasons = standing(record, [], None).record_reasons
    assert any("registered post hoc (`preregister --post-hoc`)" in r and ran[0][:12] in r for r in reasons)


def test_a_late_record_names_the_run_it_follows_and_an_undated_run_is_not_certified(paper_root: Path) -> None:  # noqa: F811
    from distrepro.claims.certification import standing
    from distrepro.claims.seed_history import SeedUse

    _, record, _ = _tiny_record(paper_root)
    registered = dt.datetime.strptime(record["date"], "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=dt.UTC)
    before = SeedUse(0, "f" * 32, registered - dt.timedelta(hours=1))
    st = standing(record, [], None, before)
    assert st.record_reasons == [
        f"the record ({record['date']}) is newer than the first confirmatory run it judges (run ffffffffffff on seed "
        f"0, started {(registered - dt.timedelta(hours=1)).strftime('%Y-%m-%dT%H:%M:%SZ')})"
    ]
    after = SeedUse(0, "f" * 32, registered + dt.timedelta(seconds=1))
    assert standing(record, [], None, after).record_reasons == []
    # a record written to the minute is taken at the minute's end: a run 30 s into it may have come first
    record = {**record, "date": registered.strftime("%Y-%m-%dT%H:%MZ")}
    assert standing(record, [], None, registered.replace(second=30)).record_reasons
    unchecked = standing(record, [], None, None, unchecked=["runs on seed(s) 1 record no start"]).unchecked
    assert unchecked == ["runs on seed(s) 1 record no start"]

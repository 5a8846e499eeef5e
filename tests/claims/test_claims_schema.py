"""The paper.yaml claims format: every file in the repo validates, and bad entries name their field."""

from __future__ import annotations

import copy
import math
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from distrepro.claims.papers import find_paper
from distrepro.claims.schema import acceptance_band, at_scale, load_paper_file, validate_paper
from distrepro.errors import ConfigError
from distrepro.metrics import unknown_metric
from distrepro.plugins.roots import repo_root

ROOT = repo_root()
SRC = {"kind": "abstract", "quote": "about 72%"}


def _paper() -> dict[str, Any]:
    return {
        "kind": "reproduction",
        "citation": {"id": "p", "title": "T"},
        "setup": {"profile": "hetero-2fast-2slow", "baseline": "ar_sgd", "min_seeds": 2},
        "claims": [
            {"id": "c0", "kind": "speedup", "arm": "local_sgd", "claimed": 3.57, "source": SRC, "evidence": "derived"},
            {
                "id": "c1",
                "kind": "final_metric",
                "arm": "local_sgd",
                "metric": "val_accuracy",
                "direction": "max",
                "claimed": 0.9,
                "source": SRC,
                "evidence": "verbatim",
            },
            {
                "id": "c2",
                "kind": "relative_improvement",
                "arm": "local_sgd",
                "metric": "final/emulated_s",
                "direction": "min",
                "claimed": [0.33, 0.5],
                "source": SRC,
                "evidence": "verbatim",
            },
        ],
    }


def test_every_paper_yaml_in_the_repo_validates() -> None:
    files = sorted(ROOT.glob("methods/*/paper.yaml"))
    assert files, "no paper.yaml found"
    known = {p.parent.name for p in ROOT.glob("methods/*/method.py")}
    for path in files:
        load_paper_file(path, known)


def test_readme_examples_validate() -> None:
    """The claims examples in docs/claims.md are real, checked YAML."""
    text = (ROOT / "docs" / "claims.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```yaml\n(.*?)```", text, flags=re.S)
    assert len(blocks) >= 2
    kinds = set()
    for block in blocks:
        spec = validate_paper(yaml.safe_load(block), "docs/claims.md")
        kinds |= {c.kind for c in spec.claims}
    assert kinds >= {"speedup", "relative_improvement", "ordering", "non_inferiority"}


def test_defaults_are_resolved_from_setup_and_kind() -> None:
    spec = validate_paper(_paper(), known_methods={"ar_sgd", "local_sgd"})
    speedup, final, rel = spec.claims
    assert speedup.baseline == "ar_sgd" and speedup.profile == "hetero-2fast-2slow" and speedup.scale == "proxy"
    assert (speedup.accept.statistic, speedup.accept.paired, speedup.accept.min_seeds) == ("geometric_mean", True, 2)
    assert (final.accept.statistic, final.accept.paired) == ("mean", False)
    # the CI decides by default, with a t-interval on one sample of per-seed values
    assert {(c.accept.rule, c.accept.ci_method) for c in spec.claims} == {("ci", "t")}
    assert [c.origin for c in spec.claims] == ["derived", "paper", "paper"]  # from evidence
    assert {c.decided_by for c in spec.claims} == {"measurement"}
    del_seeds = _paper()
    del del_seeds["setup"]["min_seeds"]
    assert {c.accept.min_seeds for c in validate_paper(del_seeds).claims} == {5}  # default: 5 seeds
    assert rel.claimed == (0.33, 0.5) and rel.form == "fraction"
    assert spec.arm("local_sgd").method == "local_sgd"  # an undeclared arm is the method of that name


def test_at_scale_moves_every_claim_and_keeps_only_ideals_of_that_scale() -> None:
    data = _paper()
    data["claims"][0]["ideal"] = {"value": 4.0, "label": "proxy bound"}  # setup.scale: proxy
    data["claims"][1]["ideal"] = {"value": 0.95, "label": "paper bound", "scale": "paper"}
    spec = validate_paper(data)
    assert [c.ideal.label if c.ideal else None for c in spec.claims] == ["proxy bound", "paper bound", None]
    paper = at_scale(spec, "paper")
    assert paper.setup.scale == "paper" and {c.scale for c in paper.claims} == {"paper"}
    assert [c.ideal.label if c.ideal else None for c in paper.claims] == [None, "paper bound", None]
    data["claims"][2]["scale"] = "proxy"  # a claim pinned to a scale stays there
    data["setup"]["scale"] = "paper"
    assert [c.scale for c in at_scale(validate_paper(data), "paper").claims] == ["paper", "paper", "proxy"]
    assert [c.ideal.label if c.ideal else None for c in at_scale(spec, "proxy").claims] == ["proxy bound", None, None]


def _set(data: dict[str, Any], path: str, value: Any) -> None:
    keys = re.findall(r"[^.\[\]]+", path)
    node: Any = data
    for k in keys[:-1]:
        node = node[int(k)] if k.isdigit() else node[k]
    last = keys[-1]
    if value is _DELETE:
        del node[last]
    elif last.isdigit():
        node[int(last)] = value
    else:
        node[last] = value


_DELETE = object()


@pytest.mark.parametrize(
    ("path", "value", "field", "message"),
    [
        ("claims.1.direction", "up", "claims[1].direction", "'max' or 'min'"),
        ("claims.0.kind", "faster", "claims[0].kind", "unknown claim kind 'faster'"),
        ("claims.0.kind", _DELETE, "claims[0].kind", "missing"),
        ("claims.1.claimd", 0.9, "claims[1].claimd", "Extra inputs are not permitted"),
        ("claims.2.claimed", [0.5, 0.33], "claims[2].claimed", "[low, high]"),
        ("claims.0.claimed", "fast", "claims[0].claimed", "a number or a [low, high] range"),
        ("claims.0.claimed", -2.0, "claims[0].claimed", "must be positive"),
        ("claims.1.id", "c0", "claims[1].id", "duplicate claim id 'c0'"),
        ("claims.0.arm", "nosuchmethod", "claims[0].arm", "unknown arm 'nosuchmethod'"),
        ("claims.0.arm", _DELETE, "claims[0].arm", "needs the arm"),
        ("claims.0.baseline", "local_sgd", "claims[0].baseline", "must differ"),
        ("setup.baseline", _DELETE, "claims[0].baseline", "needs a baseline"),
        ("claims.1.accept", {"statistic": "geometric_mean"}, "claims[1].accept.statistic", "positive ratios"),
        ("claims.1.accept", {"rel_tolerance": -0.1}, "claims[1].accept.rel_tolerance", "greater than or equal to 0"),
        ("claims.1.evidence", "hearsay", "claims[1].evidence", "'verbatim'"),
        ("claims.1.source", {"kind": "poster"}, "claims[1].source.kind", "'table'"),
        ("claims.0.clock", "epochs", "claims[0].clock", "emulated or wall clock only"),
        ("claims.0.conflicts_with", ["c9"], "claims[0].conflicts_with[0]", "no other claim with id 'c9'"),
        ("setup.arms", {"x": {"method": "nosuch"}}, "setup.arms.x.method", "unknown method 'nosuch'"),
        ("setup.min_seeds", 0, "setup.min_seeds", "greater than or equal to 1"),
        ("setup.min_seeds", 1, "setup.min_seeds", "rule ci needs at least 2 seeds"),
        ("claims.1.origin", "rumour", "claims[1].origin", "'paper', 'derived' or 'reconstructed'"),
        ("claims.0.origin", "paper", "claims[0].origin", "evidence is 'derived'"),
        ("claims.1.decided_by", "model_structure", "claims[1].why", "must say why it cannot vary"),
        ("claims.1.why", "because", "claims[1].why", "only a claim decided by model_structure"),
        ("claims.1.accept", {"statistic": "median", "ci_method": "t"}, "claims[1].accept.ci_method", "use bca"),
        ("claims.0.accept", {"paired": False, "ci_method": "t"}, "claims[0].accept.ci_method", "one sample"),
        ("claim", [], "claim", "Extra inputs are not permitted"),
        ("claims.1.metric", "val_acc", "claims[1].metric", "claim 'c1': unknown metric 'val_acc'"),
        ("claims.2.metric", "final/emulated", "claims[2].metric", "claim 'c2': unknown metric 'final/emulated'"),
        (
            "claims.0.target",
            {"metric": "accuracy", "value": 0.9, "direction": "max"},
            "claims[0].target.metric",
            "claim 'c0': unknown metric 'accuracy'",
        ),
        (
            "claims.0.target",
            {"metric": "method/local_steps/rank1", "value": 3.0, "direction": "max"},
            "claims[0].target.metric",
            "logged at the final evaluation only",
        ),
        (
            "claims.0.target",
            {"metric": "worker/0/idle_s", "value": 3.0, "direction": "min"},
            "claims[0].target.metric",
            "one rank's value",
        ),
    ],
)
def test_bad_entries_name_file_and_field(path: str, value: Any, field: str, message: str, tmp_path: Path) -> None:
    data = copy.deepcopy(_paper())
    _set(data, path, value)
    file = tmp_path / "paper.yaml"
    file.write_text(yaml.safe_dump(data))
    with pytest.raises(ConfigError) as info:
        load_paper_file(file, known_methods={"ar_sgd", "local_sgd"})
    err = info.value
    assert err.source == str(file)
    assert err.field == field
    assert message in err.message
    assert str(err).startswith(f"{file}: field '{field}'")


def test_claims_may_name_every_metric_family_a_run_logs() -> None:
    """Harness names, their families and a method's own ``ctx.record`` keys (``method/<name>``) are known;
    the message for an unknown one is one line that points at the close names."""
    for name in (
        "val_accuracy",
        "final/val_loss",
        "final/useful_flops_per_emulated_s",
        "time_to_target_s",
        "worker/3/comm_s",
        "alloc/0/share",
        "emu_ms/val_accuracy",
        "method/local_steps",
        "method/local_steps/rank2",
        "method/qsr/period",
    ):
        data = _paper()
        data["claims"][1]["metric"] = name
        assert validate_paper(data).claims[1].metric == name
    why = unknown_metric("final/val_accurcy")
    assert why is not None and "\n" not in why and "distrepro/metrics.py" in why
    assert unknown_metric("worker/x/comm_s") is not None and unknown_metric("method/") is not None


def test_ordering_rejects_a_repeated_arm() -> None:
    data = _paper()
    data["claims"] = [
        {
            "id": "o",
            "kind": "ordering",
            "arms": ["local_sgd", "local_sgd"],
            "metric": "final/emulated_s",
            "direction": "min",
            "source": SRC,
            "evidence": "reconstructed",
        }
    ]
    with pytest.raises(ConfigError, match=r"claims\[0\]\.arms.*listed twice"):
        validate_paper(data)


def test_acceptance_band() -> None:
    spec = validate_paper(_paper())
    speedup, final, rel = spec.claims
    assert acceptance_band(speedup, True) == (3.57, 3.57)
    widened = final.model_copy(
        update={"accept": final.accept.model_copy(update={"abs_tolerance": 0.02, "rel_tolerance": 0.01})}
    )
    assert acceptance_band(widened, True) == pytest.approx((0.88, 0.92))  # max(0.02, 0.009) on each side
    one_sided = rel.model_copy(update={"accept": rel.accept.model_copy(update={"sided": "one_sided"})})
    assert acceptance_band(one_sided, True) == (0.33, math.inf)
    assert acceptance_band(one_sided, False) == (-math.inf, 0.5)


def _method(root: Path, name: str, paper: dict[str, Any] | None) -> None:
    folder = root / "methods" / name
    folder.mkdir(parents=True)
    (folder / "method.py").write_text("")
    if paper is not None:
        (folder / "paper.yaml").write_text(yaml.safe_dump(paper))


def test_find_paper_merges_method_folders_and_keeps_one_claims_file(tmp_path: Path) -> None:
    claims = {**_paper(), "citation": {"id": "p", "title": "T"}}
    plain = {"kind": "baseline", "citation": {"id": "p", "title": "T"}}
    _method(tmp_path, "ar_sgd", plain)
    _method(tmp_path, "local_sgd", claims)
    _method(tmp_path, "other", {"kind": "baseline", "citation": {"id": "q", "title": "Q"}})
    info = find_paper("p", tmp_path)
    assert info.spec is not None and len(info.spec.claims) == 3
    assert info.path == tmp_path / "methods" / "local_sgd" / "paper.yaml"
    assert [d.name for d in info.method_dirs] == ["ar_sgd", "local_sgd"]
    assert find_paper("adhoc", tmp_path).spec is None
    _method(tmp_path, "dup", claims)
    with pytest.raises(ConfigError, match="already has claims"):
        find_paper("p", tmp_path)


def test_find_paper_reports_malformed_yaml(tmp_path: Path) -> None:
    _method(tmp_path, "broken", None)
    (tmp_path / "methods" / "broken" / "paper.yaml").write_text("kind: [unclosed\n")
    with pytest.raises(ConfigError, match=r"broken/paper.yaml: malformed YAML at line 2"):
        find_paper("p", tmp_path)

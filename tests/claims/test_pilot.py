"""Choosing n from a pilot's spread: the per-claim s and d (the claim's smallest effect of interest, else the
pilot's safeguard distance, never its observed one), the n over the headline claims, the record's ``pilot:`` block,
and the one-line error without a pilot. Hand-built run tables and per-seed values: no training."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
import yaml
from scipy import stats
from tiny_paper import paper_root  # noqa: F401  (the fixture)

from distrepro.claims.pilot import (
    NOT_RESOLVABLE,
    SAFEGUARD,
    PilotRequest,
    claim_line,
    pilot_runs,
    plan_claim,
    plan_scale,
)
from distrepro.claims.planning import seeds_for_power
from distrepro.claims.schema import validate_paper
from distrepro.errors import ConfigError

PROFILE = "hetero-2fast-2slow"


def _spec(*claims: dict[str, Any], min_seeds: int = 3) -> Any:
    data = {
        "kind": "reproduction",
        "citation": {"id": "pilotpaper", "title": "Piloted"},
        "setup": {"profile": PROFILE, "baseline": "base", "min_seeds": min_seeds},
        "claims": [{"source": {"kind": "text"}, "evidence": "verbatim", **c} for c in claims],
    }
    return validate_paper(data)


def _runs(arms: dict[str, dict[int, float]], column: str = "final/emulated_s") -> pd.DataFrame:
    rows = []
    for method, values in arms.items():
        for seed, value in values.items():
            rows.append(
                {
                    "run_id": f"{method}-{seed}",
                    "parent_run_id": f"campaign-{method}",
                    "method": method,
                    "profile": PROFILE,
                    "seed": seed,
                    "status": "FINISHED",
                    "start_time": pd.Timestamp("2026-01-01", tz="UTC") + pd.Timedelta(seconds=len(rows)),
                    column: value,
                }
            )
    return pd.DataFrame(rows)


BASE = {0: 10.0, 1: 12.0, 2: 9.0, 3: 11.0, 4: 10.5}
FAST = {0: 5.0, 1: 5.5, 2: 4.4, 3: 5.6, 4: 5.0}  # per-seed speedups 2.0, 2.18, 2.05, 1.96, 2.1
SPEEDUP = {"id": "fast", "kind": "speedup", "arm": "fast", "claimed": 2.0, "accept": {"rel_tolerance": 0.1}}


def _log_ratios() -> np.ndarray:
    return np.log([BASE[s] / FAST[s] for s in sorted(BASE)])


@pytest.mark.smoke
def test_a_tolerance_sets_d_and_both_edges_share_the_miss_rate() -> None:
    # band [1.8, 2.2] around the claimed 2.0: on the log scale the edges are log(2/1.8) = 0.1054 below and
    # log(2.2/2) = 0.0953 above; two edges → each planned at power 1 − 0.2/2 = 0.9
    spec = _spec(SPEEDUP)
    plan = plan_claim(spec.claims[0], spec, _runs({"base": BASE, "fast": FAST}), None, 0.8, 30)
    s = float(np.std(_log_ratios(), ddof=1))
    assert plan.status == "planned" and plan.headline and plan.on == "log" and plan.pilot_seeds == 5
    assert plan.s == pytest.approx(s, rel=1e-12)
    assert plan.d == pytest.approx(math.log(1.1), rel=1e-12) and "tolerance" in plan.d_from
    assert plan.power_per_edge == pytest.approx(0.9)
    assert plan.n == max(3, seeds_for_power(s, math.log(1.1), 0.9), seeds_for_power(s, math.log(2 / 1.8), 0.9))


def test_the_planned_d_is_the_claims_not_the_pilots_observed_distance() -> None:
    # the same spread with a pilot effect far from the claimed value: d stays the tolerance, so n does not move
    spec = _spec(SPEEDUP)
    shifted = {s: v / 1.05 for s, v in FAST.items()}  # every speedup × 1.05: the pilot sits 0.05 from the edge
    a = plan_claim(spec.claims[0], spec, _runs({"base": BASE, "fast": FAST}), None, 0.8, 30)
    b = plan_claim(spec.claims[0], spec, _runs({"base": BASE, "fast": shifted}), None, 0.8, 30)
    assert a.d == b.d and a.n == b.n
    assert a.s == pytest.approx(b.s, rel=1e-9)


def test_without_an_effect_size_the_safeguard_distance_is_planned() -> None:
    # "faster than the baseline": claimed 1.0 one-sided, the edge is the claimed value (no effect size). d is the
    # pilot's distance minus t(0.8, n−1)·s/√n (Perugini et al. 2014), below the observed distance
    spec = _spec({**SPEEDUP, "claimed": 1.0, "accept": {"sided": "one_sided"}})
    plan = plan_claim(spec.claims[0], spec, _runs({"base": BASE, "fast": FAST}), None, 0.8, 30)
    x = _log_ratios()
    observed = float(np.mean(x))
    safeguard = observed - stats.t.ppf(0.8, 4) * np.std(x, ddof=1) / math.sqrt(5)
    assert plan.d_from == SAFEGUARD and plan.d == pytest.approx(safeguard, rel=1e-9) and plan.d < observed
    assert plan.power_per_edge == pytest.approx(0.8)
    assert plan.n == max(3, seeds_for_power(float(np.std(x, ddof=1)), safeguard, 0.8))


def test_a_pilot_without_an_effect_gives_nothing_to_plan_for() -> None:
    spec = _spec({**SPEEDUP, "claimed": 1.0, "accept": {"sided": "one_sided"}})
    same = {0: 10.0, 1: 12.0, 2: 9.0, 3: 11.0, 4: 10.5}
    noisy = {0: 10.5, 1: 11.5, 2: 9.5, 3: 10.5, 4: 11.0}  # ratios around 1: the 80 % bound does not clear 1
    plan = plan_claim(spec.claims[0], spec, _runs({"base": same, "fast": noisy}), None, 0.8, 30)
    assert plan.status.startswith("not planned") and plan.n is None and plan.d is None
    assert "the pilot shows no effect to plan for" in claim_line("fast", {**plan.__dict__, "headline": True}, 30)


def test_a_claim_needing_more_than_the_cap_is_not_resolvable_and_does_not_set_n() -> None:
    # per-seed speedups spread by ±25 % against a 2 % tolerance: hundreds of seeds
    wide = {**SPEEDUP, "id": "tight", "accept": {"rel_tolerance": 0.02}}
    spec = _spec(SPEEDUP, wide)
    noisy = {0: 4.0, 1: 6.5, 2: 4.4, 3: 6.6, 4: 5.0}
    runs = _runs({"base": BASE, "fast": noisy})
    plan = plan_scale(spec, "proxy", runs, None, 0.8, 30, fallback_n=4)
    by_id = {p.claim_id: p for p in plan.claims}
    assert by_id["tight"].status == NOT_RESOLVABLE and by_id["tight"].n is None
    assert by_id["fast"].n is not None and by_id["fast"].n <= 30
    assert plan.n == by_id["fast"].n and plan.n_from.startswith("the largest over the planned headline")
    record = plan.record()
    line = claim_line("tight", record["claims"]["tight"], 30)
    assert f"needs more than 30 seeds: {NOT_RESOLVABLE}" in line
    assert record["seeds"] == [0, 1, 2, 3, 4] and record["campaigns"] == ["campaign-base", "campaign-fast"]


def test_n_is_the_largest_over_headline_claims_only() -> None:
    # a derived claim (not the paper's) needing more seeds is listed but does not set n
    derived = {**SPEEDUP, "id": "derived", "evidence": "derived", "accept": {"rel_tolerance": 0.03}}
    spec = _spec(SPEEDUP, derived)
    plan = plan_scale(spec, "proxy", _runs({"base": BASE, "fast": FAST}), None, 0.8, 30)
    by_id = {p.claim_id: p for p in plan.claims}
    assert not by_id["derived"].headline and by_id["derived"].n > by_id["fast"].n  # type: ignore[operator]
    assert plan.n == by_id["fast"].n
    assert "(not headline: does not set n)" in claim_line("derived", plan.record()["claims"]["derived"], 30)


def test_non_inferiority_plans_on_its_margin_at_a_true_difference_of_zero() -> None:
    claim = {
        "id": "keeps",
        "kind": "non_inferiority",
        "arm": "fast",
        "metric": "final/val_accuracy",
        "direction": "max",
        "margin": 0.01,
    }
    spec = _spec(claim)
    acc_base = {0: 0.90, 1: 0.91, 2: 0.89, 3: 0.905, 4: 0.895}
    acc_fast = {0: 0.905, 1: 0.90, 2: 0.893, 3: 0.90, 4: 0.90}
    runs = _runs({"base": acc_base, "fast": acc_fast}, "final/val_accuracy")
    plan = plan_claim(spec.claims[0], spec, runs, None, 0.8, 30)
    diffs = np.array([acc_fast[s] - acc_base[s] for s in range(5)])
    assert plan.on == "value" and plan.d == pytest.approx(0.01) and "margin" in plan.d_from
    assert plan.s == pytest.approx(float(np.std(diffs, ddof=1)))
    assert plan.n == max(3, seeds_for_power(float(np.std(diffs, ddof=1)), 0.01, 0.8))


def test_unplannable_claims_say_why() -> None:
    structural = {**SPEEDUP, "id": "structural", "decided_by": "model_structure", "why": "bytes are fixed"}
    spec = _spec(structural, {**SPEEDUP, "id": "lonely", "arm": "other"})  # no run of arm 'other' in the pilot
    plan = plan_scale(spec, "proxy", _runs({"base": BASE, "fast": FAST}), None, 0.8, 30, fallback_n=5)
    by_id = {p.claim_id: p for p in plan.claims}
    assert "model's structure" in by_id["structural"].status
    assert "no finished pilot run" in by_id["lonely"].status and "other" in by_id["lonely"].status
    assert plan.n == 5 and "no headline claim was planned" in plan.n_from


def test_only_exploratory_seeds_are_a_pilot() -> None:
    runs = _runs({"base": {**BASE, 100: 10.0, 101: 11.0}, "fast": {**FAST, 100: 5.0}})
    assert sorted(set(pilot_runs(runs)["seed"])) == [0, 1, 2, 3, 4]
    assert sorted(set(pilot_runs(runs, [1, 2])["seed"])) == [1, 2]
    with pytest.raises(ConfigError, match="exploratory seeds 0-99"):
        PilotRequest(seeds=[3, 100])
    with pytest.raises(ConfigError, match="--power"):
        PilotRequest(power=1.2)


def test_the_record_keeps_the_plan(tmp_path: Path) -> None:
    from distrepro.claims.preregistration import build_record, load_record, record_path, write_record

    spec = _spec(SPEEDUP)
    paper_file = tmp_path / "p" / "paper.yaml"
    paper_file.parent.mkdir()
    paper_file.write_text(yaml.safe_dump(spec.model_dump(mode="json", exclude_none=True)))
    block = plan_scale(spec, "proxy", _runs({"base": BASE, "fast": FAST}), None, 0.8, 30).record()
    seeds = list(range(100, 100 + block["n"]))
    record = build_record("pilotpaper", paper_file, spec, "proxy", seeds, pilot=block)
    loaded = load_record(write_record(record, record_path(paper_file, "proxy")))
    assert loaded is not None and loaded["pilot"] == block and loaded["n"] == block["n"]
    assert set(block["claims"]["fast"]) >= {"s", "d", "d_from", "n", "headline", "power_per_edge", "alpha"}
    assert "smallest n with" in block["rule"] and block["power"] == 0.8
    assert "pilot" not in build_record("pilotpaper", paper_file, spec, "proxy", seeds)  # no pilot, no block


# ---------------------------------------------------------------- the command, on a store


def test_pilot_without_runs_is_one_line_naming_what_is_missing(
    paper_root: Path,  # noqa: F811
    mlflow_uri: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from distrepro.cli import main

    assert main(["preregister", "tinypaper", "--scale", "proxy", "--pilot"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert "no runs of tinypaper at proxy scale on seeds below 100" in err
    assert "distrepro reproduce tinypaper --scale proxy --seeds 0-4" in err
    assert not (paper_root / "methods" / "tiny" / "preregistration" / "proxy.yaml").exists()


def _log_pilot(uri: str, seeds: list[int]) -> str:
    """Pilot runs of tinypaper logged by hand: the two arms' bytes, a 2× cut with a little spread per seed."""
    from distrepro.tracking.campaign_run import Campaign
    from distrepro.tracking.mlflow_client import experiment_name

    tags = {"distrepro.paper": "tinypaper", "distrepro.campaign": "pilot"}
    with Campaign(experiment_name("tinypaper"), "pilot", tags, tracking_uri=uri, flush_every_s=None) as c:
        for seed in seeds:
            for method, params, total in (("ar_sgd", {}, 2e6), ("local_sgd", {"period": 2}, 1e6 * (1 + 0.01 * seed))):
                child_tags = {"distrepro.method": method, "distrepro.profile": PROFILE, "distrepro.seed": str(seed)}
                with c.child(f"{method}-s{seed}", {"method_params": params}, child_tags) as child:
                    child.log_summary({"comm/bytes_total": total})
        assert c.run_id is not None
        return c.run_id


def test_preregister_pilot_plans_n_and_writes_the_block(
    paper_root: Path,  # noqa: F811
    mlflow_uri: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from distrepro.claims.preregistration import load_record
    from distrepro.cli import main

    # seed 150 is confirmatory: never part of the pilot (and not a seed the record names: it ran before the record)
    campaign = _log_pilot(mlflow_uri, [0, 1, 2, 3, 150])
    assert main(["preregister", "tinypaper", "--scale", "proxy", "--pilot-campaign", campaign]) == 0
    out = capsys.readouterr().out
    record = load_record(paper_root / "methods" / "tiny" / "preregistration" / "proxy.yaml")
    assert record is not None
    block = record["pilot"]
    assert block["seeds"] == [0, 1, 2, 3] and block["campaigns"] == [campaign] and block["power"] == 0.8
    entry = block["claims"]["fewer-bytes"]
    ratios = np.log([2e6 / (1e6 * (1 + 0.01 * s)) for s in range(4)])
    assert entry["s"] == pytest.approx(float(np.std(ratios, ddof=1)), rel=1e-5)
    assert entry["d"] == pytest.approx(math.log(2.4 / 2.0), rel=1e-5) and not entry["headline"]
    # the claim is derived, not the paper's: n comes from the configs (2 seeds), and the seeds follow it from 100
    assert record["n"] == block["n"] == 2 and record["seeds"] == [100, 101]
    assert "`fewer-bytes` (not headline: does not set n)" in out and "--seeds 100,101" in out
    assert entry["alpha"] == 0.025 and entry["power_per_edge"] == 0.9  # a two-sided band: each edge at 0.9
    # --seeds overrides the plan's n, and the command says so
    again = ["preregister", "tinypaper", "--scale", "proxy", "--pilot-seeds", "0-3", "--seeds", "100-104", "--replace"]
    assert main(again) == 0
    assert "note: --seeds registers n = 5, not the n = 2 the pilot plans" in capsys.readouterr().out


def test_the_block_names_only_the_seeds_and_campaigns_the_claims_read() -> None:
    # a run of another method (another scale's arm, say) on seed 7 is in the store but no claim here reads it
    runs = _runs({"base": BASE, "fast": FAST, "unrelated": {7: 1.0}})
    block = plan_scale(_spec(SPEEDUP), "proxy", runs, None).record()
    assert block["seeds"] == [0, 1, 2, 3, 4] and "campaign-unrelated" not in block["campaigns"]


def test_a_frozen_record_is_refused_before_the_pilot_is_read(paper_root: Path) -> None:  # noqa: F811
    from distrepro.claims.preregistration import preregister

    preregister("tinypaper", "proxy")
    read = []
    with pytest.raises(ConfigError, match="already registered"):
        preregister("tinypaper", "proxy", pilot=lambda *a: read.append(a) or {"n": 2})
    assert read == []  # the store was never asked

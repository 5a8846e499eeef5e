"""Issue 24: the mid scale. One arm per paper runs a few steps of its ``*.mid.yaml`` (MNIST-1D, generated offline)
and logs the values its claims' regime conditions read; only accuracy and convergence claims move to it."""

from __future__ import annotations

from pathlib import Path

import pytest

from distrepro.claims.papers import arms_at_scale, find_paper
from distrepro.claims.schema import at_scale, claim_arms
from distrepro.config.run_config import load_config
from distrepro.engine.inprocess import InProcessEngine
from distrepro.orchestration.job import build_job

pytest.importorskip("mnist1d")
ROOT = Path(__file__).resolve().parents[2]
#: (paper, arm config, method params that pick the arm, the regime metric the arm records)
AER, RING = 'method_params.topology="alternating-exp-ring"', 'method_params.topology="ring"'
ARMS = [
    ("qsr", "methods/qsr/configs/qsr.mid.yaml", [], "max_period_ratio"),
    ("decentdp", "methods/decentdp/configs/accum.mid.yaml", [AER], "moment_refreshes"),
    ("acid", "methods/acid/configs/train16.mid.yaml", [RING, "method_params.apply_acid=true"], "mixing_times"),
]


@pytest.mark.smoke
@pytest.mark.parametrize(("paper", "config", "sets", "record"), ARMS, ids=[a[0] for a in ARMS])
def test_one_mid_arm_per_paper_trains_and_records_its_regime(
    paper: str, config: str, sets: list[str], record: str
) -> None:
    sets = [*sets, "budget={steps: 8}", "eval={times: 1}", "seeds=[0]", "scale=mid"]
    sets.append("dataset.params.num_samples=1000")  # the mid configs' 10,000 signals take seconds to generate
    cfg = load_config(ROOT / config, sets)
    assert cfg.dataset.name == "mnist1d" and cfg.model.name == "cnn1d" and cfg.scale == "mid"
    result = InProcessEngine().run(build_job(cfg, 0))
    assert result.final.step == 8 and 0.0 <= result.final.metrics["val_accuracy"] <= 1.0
    assert result.final.method_records[record] > 0


def test_mid_reproductions_re_decide_accuracy_claims_on_mid_arms_only() -> None:
    for paper in ("qsr", "decentdp", "acid"):
        info = find_paper(paper)
        assert info.spec is not None
        available = arms_at_scale(info, "mid")
        mid = at_scale(info.spec, "mid", available)
        moved = [c for c in mid.claims if c.scale == "mid"]
        assert moved, f"{paper}: no claim re-decided at mid scale"
        for claim in moved:
            assert claim.kind != "speedup" and set(claim_arms(claim)) <= available
            assert claim.regime, f"{paper} {claim.id}: a mid-scale claim without regime conditions"
        assert any(c.kind == "speedup" and c.scale != "mid" for c in mid.claims)  # timing stays where it was

"""Issue 24: the mid scale. One arm per paper runs a few steps of its ``*.mid.yaml`` (MNIST-1D, generated offline)
and logs the values its claims' regime conditions read; only accuracy and convergence claims move to it, and
``reproduce --scale mid`` trains only their arms."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from distrepro.claims.papers import arms_at_scale, find_paper
from distrepro.claims.schema import at_scale, claim_arms, judged_at_mid
from distrepro.config.overrides import parse_overrides
from distrepro.config.run_config import load_config
from distrepro.engine.inprocess import InProcessEngine
from distrepro.job.resolve import build_job
from distrepro.orchestration.campaign import CampaignResult
from distrepro.reproduction import reproduce as reproduce_module
from distrepro.reproduction import training as training_module

pytest.importorskip("mnist1d")
ROOT = Path(__file__).resolve().parents[2]
#: (paper, arm config, method params that pick the arm, the regime metric the arm records, or None)
AER, RING = 'method_params.topology="alternating-exp-ring"', 'method_params.topology="ring"'
ARMS = [
    ("qsr", "methods/qsr/configs/qsr.mid.yaml", [], "max_period_ratio"),
    ("decentdp", "methods/decentdp/configs/accum.mid.yaml", [AER], "moment_refreshes"),
    ("acid", "methods/acid/configs/train16.mid.yaml", [RING, "method_params.apply_acid=true"], "mixing_times"),
    ("cadp", "methods/cadp/configs/cadp.mid.yaml", [], "rounds"),  # one step = one PS round
    ("chao", "methods/chao_alloc/configs/2m-1124.mid.yaml", ['method_params.mode="static"'], None),
]
#: the claims each paper re-decides at mid scale (its accuracy and convergence claims) and the arms they train
MID_CLAIMS = {
    "cadp": ({"A-C5", "A-C5-ds"}, {"cadp", "ddp", "deepspeed"}),
    "chao": ({"B-C3-1m", "B-C3-2m"}, {"static-1to2", "equal-1to2", "static-1124", "equal-1124"}),
}


@pytest.mark.smoke
@pytest.mark.parametrize(("paper", "config", "sets", "record"), ARMS, ids=[a[0] for a in ARMS])
def test_one_mid_arm_per_paper_trains_and_records_its_regime(
    paper: str, config: str, sets: list[str], record: str | None
) -> None:
    sets = [*sets, "budget={steps: 8}", "eval={times: 1}", "seeds=[0]", "scale=mid"]
    sets.append("dataset.params.num_samples=1000")  # the mid configs' 10,000 signals take seconds to generate
    cfg = load_config(ROOT / config, parse_overrides(sets))
    assert cfg.dataset.name == "mnist1d" and cfg.model.name == "cnn1d" and cfg.scale == "mid"
    result = InProcessEngine().run(build_job(cfg, 0))
    assert result.final.step == 8 and 0.0 <= result.final.metrics["val_accuracy"] <= 1.0
    if record is not None:
        assert result.final.method_records[record] > 0
    if paper == "cadp":  # 8 delayed syncs in 8 steps: the value the sync_rounds condition reads
        assert result.final.method_records["rounds"] == 8
    if paper == "chao":  # the mid scale keeps the global batch 256 and its proportional 1:1:2:4 split
        batches = result.allocations[0][1].batch_sizes
        assert sum(batches) == 256
        assert all(abs(b - 256 * r / 8) <= 1 for b, r in zip(batches, (1, 1, 2, 4), strict=True))


def test_mid_reproductions_re_decide_accuracy_claims_on_mid_arms_only() -> None:
    for paper in ("qsr", "decentdp", "acid", "cadp", "chao"):
        info = find_paper(paper)
        assert info.spec is not None
        available = arms_at_scale(info, "mid")
        mid = at_scale(info.spec, "mid", available)
        moved = [c for c in mid.claims if c.scale == "mid"]
        assert moved, f"{paper}: no claim re-decided at mid scale"
        for claim in moved:
            assert claim.kind != "speedup" and set(claim_arms(claim)) <= available
            assert claim.regime, f"{paper} {claim.id}: a mid-scale claim without regime conditions"
        timing = [c for c in mid.claims if not judged_at_mid(c)]
        assert timing and all(c.scale != "mid" for c in timing)  # timing stays where it was
        if paper in MID_CLAIMS:
            claims, arms = MID_CLAIMS[paper]
            assert {c.id for c in moved} == claims
            assert {a for c in moved for a in claim_arms(c)} == arms


def test_cadp_flops_claims_stay_at_proxy() -> None:
    """FLOPS per emulated second is the inverse of the emulated time: A-C1/A-C2/A-D2 are timing claims, although
    the C-ADP and DDP arms have mid configs."""
    info = find_paper("cadp")
    assert info.spec is not None
    mid = at_scale(info.spec, "mid", arms_at_scale(info, "mid"))
    flops = [c for c in mid.claims if getattr(c, "metric", "") == "final/useful_flops_per_emulated_s"]
    assert {c.id for c in flops} == {"A-C1", "A-C2", "A-D2"}
    assert all(c.scale == "proxy" for c in flops)


@pytest.mark.parametrize("paper", sorted(MID_CLAIMS))
def test_reproduce_at_mid_scale_trains_the_accuracy_arms_on_their_mid_configs(
    paper: str, mlflow_uri: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``reproduce <paper> --scale mid`` loads each accuracy arm's ``.mid.yaml`` and no timing arm (nothing trains:
    the campaign runner is replaced by one that records what it was given)."""
    given: dict[str, tuple[Path, str]] = {}

    def fake_campaign(cfg: Any, source: Path, **kwargs: Any) -> CampaignResult:
        given[cfg.name] = (Path(source), cfg.scale)
        return CampaignResult(f"distrepro/{paper}", "", mlflow_uri, [])

    monkeypatch.setattr(training_module, "run_campaign", fake_campaign)
    done = reproduce_module.reproduce(paper, scale="mid", report=False, show_progress=False)
    _, arms = MID_CLAIMS[paper]
    assert set(done.campaigns) == arms and set(given) == arms
    assert all(path.name.endswith(".mid.yaml") and scale == "mid" for path, scale in given.values())

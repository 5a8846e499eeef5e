"""QSR's synchronization rule (methods/qsr/rule.py) on hand-computed schedules, and its plan against a real run.

The expected lists below are worked out by hand from the rule: H_base during the warm-up and for the first
round, ``max(H_base, floor((alpha/lr)**gamma))`` from the LR of a round's first step, the last round cut by
the budget. The plan must count exactly the averagings a run performs.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from distrepro.config.overrides import parse_overrides
from distrepro.config.run_config import validate_config
from distrepro.engine.inprocess import InProcessEngine
from distrepro.job.resolve import build_job
from distrepro.orchestration.plan import build_plan
from distrepro.plugins.registry import get_method, plugin_module

rule = plugin_module("qsr", "rule")
SyncRule = rule.SyncRule


def test_warmup_keeps_h_base_whatever_the_lr() -> None:
    r = SyncRule(h_base=2, alpha=1.0, warmup_steps=5)
    assert r.period(3, 0.01, 100) == 2  # (1/0.01)^2 = 10,000 but still warming up
    assert r.period(5, 0.01, 100) == 95  # first step after the warm-up: capped by the 95 steps left


def test_floor_not_round() -> None:
    r = SyncRule(h_base=2, alpha=1.0)
    assert r.period(10, 0.3, 1000) == 11  # (1/0.3)^2 = 11.11
    assert r.period(10, 1 / 2.99, 1000) == 8  # 2.99^2 = 8.94: floor, not 9


def test_h_base_dominates_a_large_lr() -> None:
    r = SyncRule(h_base=4, alpha=0.1)
    assert r.period(10, 0.5, 1000) == 4  # (0.1/0.5)^2 = 0.04 < 4


def test_last_round_is_cut_by_the_budget() -> None:
    r = SyncRule(h_base=2, alpha=1.0)
    assert r.period(15, 0.3, 20) == 5  # 11 wanted, 5 steps left
    assert SyncRule(h_base=4).period(18, 0.1, 20) == 2  # constant H is cut too


def test_linear_and_gamma_variants() -> None:
    assert SyncRule(h_base=2, alpha=3.0, gamma=1).period(10, 0.4, 1000) == 7  # 3/0.4 = 7.5
    assert SyncRule(h_base=2, alpha=1.0, gamma=3).period(10, 0.5, 1000) == 8  # 2^3
    assert SyncRule(h_base=2, alpha=0.0, gamma=3).period(10, 1e-9, 1000) == 2  # alpha 0: constant H


@pytest.mark.smoke
def test_first_round_is_h_base_even_without_warmup() -> None:
    r = SyncRule(h_base=3, alpha=1.0)
    assert rule.round_lengths(r, lambda t: 0.1, 250)[:2] == [3, 100]


@pytest.mark.smoke
def test_round_lengths_on_a_step_schedule() -> None:
    def lr(t: int) -> float:
        return 1.0 if t < 8 else (0.5 if t < 12 else 0.25)

    r = SyncRule(h_base=2, alpha=1.0, warmup_steps=4)
    # t0 first -> 2; t2 warm-up -> 2; t4, t6: (1/1)^2 = 1 < 2 -> 2; t8: (1/0.5)^2 = 4; t12: 16, 8 steps left -> 8
    lengths = rule.round_lengths(r, lr, 20)
    assert lengths == [2, 2, 2, 2, 4, 8]
    assert rule.run_length(lengths) == "2×4, 4, 8"
    assert rule.first_growth(r, lengths) == 8


def test_post_local_runs_h_1_before_the_switch() -> None:
    r = SyncRule(h_base=4, switch_step=3)
    assert rule.round_lengths(r, lambda t: 0.1, 12) == [1, 1, 1, 4, 4, 1]


@pytest.mark.parametrize("total,h", [(20, 4), (21, 4), (7, 8)])
def test_constant_h_has_ceil_t_over_h_rounds(total: int, h: int) -> None:
    assert len(rule.round_lengths(SyncRule(h_base=h), lambda t: 0.1, total)) == -(-total // h)


def test_bad_rule_is_refused() -> None:
    with pytest.raises(ValueError, match="h_base"):
        SyncRule(h_base=0)


TINY: dict[str, Any] = {
    "name": "qsr-tiny",
    "method": "qsr",
    "method_params": {"lr": 0.05, "momentum": 0.9, "h_base": 2, "alpha": 0.02},
    "profile": "homogeneous-4",
    "dataset": {"name": "synthetic", "params": {"train_size": 256, "test_size": 64, "image_size": 8}},
    "model": {"name": "small_cnn", "params": {"hidden": 16}},
    "batch_size": 8,
    "budget": {"steps": 60},
    "schedule": {"kind": "cosine", "warmup_steps": 6, "warmup_start_lr": 1e-6, "final_lr": 1e-6},
    "eval": {"times": 1},
    "torch_threads": 1,
}


def test_plan_counts_the_averagings_a_run_performs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "tiny.yaml"
    path.write_text(yaml.safe_dump(TINY), encoding="utf-8")
    plan = build_plan(path)["method_plan"]
    assert plan["rounds"] == len(plan["round_lengths"]) and sum(plan["round_lengths"]) == 60
    assert max(plan["round_lengths"]) > 2, "the tiny schedule must exercise the rule, not only H_base"

    cls = get_method("qsr").cls
    calls: list[tuple[int, int]] = []
    original = cls._average

    def counting(self: Any, ctx: Any) -> None:
        if ctx.rank == 0:
            calls.append((int(ctx.train_state["step"]), self.period))
        original(self, ctx)

    monkeypatch.setattr(cls, "_average", counting)
    InProcessEngine().run(build_job(validate_config(TINY), 0))
    assert len(calls) == plan["rounds"]
    assert [h for _, h in calls] == [*plan["round_lengths"][:-1], calls[-1][1]]


@pytest.mark.slow  # builds ViT-B/16 (86 M parameters) for the plan
def test_plan_of_the_vit_recipe_prints_every_round() -> None:
    root = Path(__file__).resolve().parents[2]
    plan = build_plan(root / "methods" / "qsr" / "configs" / "const.paper.yaml")["method_plan"]
    assert plan["rounds"] == 93_600 // 4 == len(plan["round_lengths"])
    assert plan["schedule"] == "4×23400"


def test_smoke_reproduction_reports_the_h_schedules(mlflow_uri: str, tmp_path: Path, monkeypatch) -> None:
    """Two arms, two seeds, one epoch of digits: every arm trains, the claims are judged (INCONCLUSIVE: 2 seeds
    < 5), and the report carries the H-schedule figures and the paper-scale time prediction."""
    from distrepro.reproduction.reproduce import reproduce

    monkeypatch.chdir(tmp_path)
    overrides = ["budget.epochs=1", "eval.times=1", "torch_threads=1"]
    arms = ["const", "qsr"]
    result = reproduce("qsr", seeds=(0, 1), overrides=parse_overrides(overrides), arms=arms, show_progress=False)
    assert set(result.campaigns) == set(arms)
    verdicts = {v.claim_id: v for v in result.report.verdicts}
    assert verdicts["P1-const"].verdict == "INCONCLUSIVE" and "seeds" in verdicts["P1-const"].reason
    text = Path(result.report.markdown).read_text(encoding="utf-8")
    assert "## Synchronization schedules" in text and "## Time model at paper scale" in text
    assert (result.report.out_dir / "figures" / "h_schedule_vit.png").is_file()


def test_difference_form_is_arm_minus_base_signed_by_direction() -> None:
    """Accuracy claims are paired differences in points (``form: difference``), not relative fractions."""
    import numpy as np

    from distrepro.claims.samples import relative as _relative

    a, b = np.array([0.81, 0.80]), np.array([0.79, 0.80])
    assert _relative("difference", "max")(a, b).tolist() == pytest.approx([0.02, 0.0])
    assert _relative("difference", "min")(a, b).tolist() == pytest.approx([-0.02, 0.0])

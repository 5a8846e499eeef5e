"""``distrepro plan``: every shipped config resolves without data or training; Local SGD's rounds are real."""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from distrepro.cli import main
from distrepro.config.run_config import validate_config
from distrepro.engine.inprocess.run import InProcessEngine
from distrepro.job.resolve import build_job
from distrepro.orchestration.plan import NOT_ESTIMATED, build_plan
from distrepro.plugins.roots import repo_root

ROOT = repo_root()
CONFIGS = sorted([*ROOT.glob("configs/*.yaml"), *ROOT.glob("methods/*/configs/*.yaml")])


@pytest.mark.parametrize("config", CONFIGS, ids=[str(c.relative_to(ROOT)) for c in CONFIGS])
def test_every_shipped_config_plans(config: Path) -> None:
    plan = build_plan(config)
    assert {"config", "allocation", "lr", "method_plan", "time"} <= plan.keys()
    json.dumps(plan)  # machine-readable as it is
    alloc = plan["allocation"]
    assert sum(alloc["shares"]) == pytest.approx(1.0) and len(alloc["batch_sizes"]) == len(alloc["shares"])
    assert all(g["compute_s"] > 0 for g in plan["time"]["compute"] if g["batch"])
    method = plan["config"]["method"]
    if method in PLANNED:
        assert isinstance(plan["method_plan"], dict) and plan["method_plan"], method
    if method in PRICED and plan["config"]["budget"]["emulated_seconds"] is None and "skip" not in plan["method_plan"]:
        assert plan["time"]["total_s"] > plan["time"]["comm_s_per_step"] > 0, plan["time"]


#: every shipped method has a ``Method.plan`` that says what it sends, so its time is estimated (ACiD's, where
#: its graph can run; gossip's, from its rate)
PLANNED = (
    "acid", "ar_sgd", "cadp", "chao_alloc", "decentdp", "deepspeed_real", "deepspeed_zero", "gossip", "local_sgd",
    "qsr", "sgp",
)  # fmt: skip
PRICED = PLANNED


def test_paper_scale_plans_without_the_data() -> None:
    plan = build_plan(ROOT / "methods/cadp/configs/cadp.paper.yaml")
    assert not Path(plan["config"]["dataset"]["root"]).exists()  # the ImageNet-100 folder is absent here
    assert plan["dataset"]["num_classes"] == 100 and "nominal" in plan["dataset"]["note"]
    assert (plan["dataset"]["train_size"], plan["dataset"]["test_size"]) == (126_689, 5_000)  # the CMC subset
    assert plan["lr"]["points"][0][1] == 0.01 and plan["lr"]["points"][-1][1] == pytest.approx(0.01 / 16)


@pytest.mark.parametrize("config", ["decentdp/configs/accum.paper.yaml", "qsr/configs/qsr.paper.yaml"])
def test_an_imagenet_1k_paper_config_plans_on_ilsvrc_2012(config: str) -> None:
    """Decent-DP's ResNet-50 recipe read its ImageNet-1k folder through the ImageNet-100 loader, so its plan counted
    that loader's 130,000 nominal images and 100 classes per epoch: a tenth of the steps the paper trains."""
    plan = build_plan(ROOT / "methods" / config)
    assert plan["dataset"]["train_size"] == 1_281_167 and plan["dataset"]["test_size"] == 50_000
    assert plan["dataset"]["num_classes"] == 1000
    cfg = plan["config"]
    if cfg["budget"]["epochs"] is not None:  # Decent-DP: 90 epochs of 1,281,167 images at 16 x 64 per step
        batch = sum(plan["allocation"]["batch_sizes"])
        assert plan["lr"]["total_steps"] == math.ceil(cfg["budget"]["epochs"] * 1_281_167 / batch) == 112_603


def _local_sgd(**over: Any) -> dict[str, Any]:
    return {
        "method": "local_sgd",
        "profile": "pair-2",
        "dataset": {"params": {"train_size": 100, "test_size": 32, "image_size": 8}},
        "batch_size": [8, 16],
        "budget": {"epochs": 1.5},  # 150 samples / 24 per step → 7 steps: rounds of 3, 3, 1
        "method_params": {"period": 3},
    } | over


def test_local_sgd_rounds_match_a_real_run(profiles: Path, tmp_path: Path) -> None:
    data = _local_sgd()
    config = tmp_path / "local.yaml"
    config.write_text(json.dumps(data))
    plan = build_plan(config)
    assert plan["method_plan"]["round_lengths"] == [3, 3, 1]
    assert plan["method_plan"]["rounds"] == 3
    harness = InProcessEngine().harness(build_job(validate_config(data), 0))
    method = harness.slots[0].method
    averagings: list[int] = []
    average = method._average  # type: ignore[attr-defined]
    method._average = lambda ctx: (averagings.append(1), average(ctx))  # type: ignore[attr-defined]
    harness.run()
    assert len(averagings) == plan["method_plan"]["rounds"]


def test_methods_without_a_plan_are_not_estimated(
    profiles: Path, tmp_path: Path, with_test_plugins: Callable[..., Path]
) -> None:
    with_test_plugins("fixed_replicas")
    config = tmp_path / "fixed.yaml"
    config.write_text(json.dumps(_local_sgd(method="fixed_replicas", method_params={})))
    plan = build_plan(config)
    assert plan["method_plan"] == NOT_ESTIMATED and plan["time"]["total_s"] == NOT_ESTIMATED
    assert plan["time"]["slowest_compute_s_per_step"] > 0


def _plan(tmp_path: Path, data: dict[str, Any]) -> dict[str, Any]:
    config = tmp_path / "run.yaml"
    config.write_text(json.dumps(data))
    return build_plan(config)


def test_gossip_plans_its_graph(profiles: Path, tmp_path: Path) -> None:
    data = _local_sgd(method="gossip", profile="hetero-2fast-2slow", batch_size=8, method_params={"rate": 2.0})
    plan = _plan(tmp_path, data)
    mp = plan["method_plan"]
    assert mp["neighbours"] == [[1, 3], [0, 2], [1, 3], [0, 2]] and mp["pick_weights"][0] == {"1": 0.5, "3": 0.5}
    assert mp["averagings_per_step"] == "Poisson(2.0)"
    assert mp["expected_bytes_per_step"] == 2 * mp["bytes_per_averaging"] > 0
    assert plan["time"]["total_s"] > 0  # asynchronous: each worker at its own pace
    (swap,) = plan["time"]["collectives"]
    assert swap["pattern"] == "gossip_pair" and swap["per_step"] == 2.0 and swap["ranks"] == 2
    exponential = _plan(tmp_path, data | {"method_params": {"topology": "exponential"}})["method_plan"]
    assert exponential["neighbours"][0] == [3, 2, 1, 2]  # i ± 1, i ± 2: rank 2 listed twice (double weight)
    assert exponential["pick_weights"][0] == {"1": 0.25, "2": 0.5, "3": 0.25}


def test_cadp_plan_is_the_allocation_a_run_uses(profiles: Path, tmp_path: Path) -> None:
    data = _local_sgd(
        method="cadp",
        batch_size=8,
        budget={"epochs": 1},
        method_params={"micro_batch": 4, "round_epochs": 0.5, "speeds": "declared"},
    )
    mp = _plan(tmp_path, data)["method_plan"]
    assert sum(mp["shares"]) == 100 and mp["rounds_in_run"] == 2
    assert mp["solution"]["makespan_s"] == pytest.approx(mp["solution"]["optimum_makespan_s"], rel=1e-4)
    assert mp["shares"][0] == pytest.approx(2 * mp["shares"][1], abs=1)  # rank 1 runs at half speed
    run = InProcessEngine().run(build_job(validate_config(data), 0))
    assert run.allocations[0][1].batch_sizes == tuple(mp["round_samples"])
    steps = [run.final.method_records[f"local_steps/rank{r}"] for r in range(2)]
    assert steps == mp["local_steps_per_round"]


def test_chao_plan_says_where_the_adaptive_split_goes(profiles: Path, tmp_path: Path) -> None:
    mp = _plan(tmp_path, _local_sgd(method="chao_alloc", method_params={"mode": "adaptive"}))["method_plan"]
    assert mp["batch_sizes"] == [12, 12] and mp["ratios"] == [0.5, 0.5]  # init: equal
    assert mp["declared_fixed_point_batch_sizes"] == [16, 8]  # rank 1 at half speed
    assert mp["ideal_time_ratio"] == pytest.approx(2 * 0.5 / 1.5)
    static = _local_sgd(method="chao_alloc", method_params={"mode": "static", "speeds": [3, 1]})
    assert _plan(tmp_path, static)["method_plan"]["batch_sizes"] == [18, 6]


def test_deepspeed_plan_prices_its_two_collectives_and_buffers(profiles: Path, tmp_path: Path) -> None:
    plan = _plan(tmp_path, _local_sgd(method="deepspeed_zero", method_params={}))
    mp = plan["method_plan"]
    assert [c["pattern"] for c in mp["transfers"]] == ["reduce_scatter", "all_gather"]  # small_cnn: no buffers
    assert mp["partition_bytes"] == mp["transfers"][0]["bytes"] / 2
    assert plan["time"]["comm_s_per_step"] > 0
    bn = _plan(
        tmp_path,
        _local_sgd(method="deepspeed_zero", method_params={}, model={"name": "resnet18_cifar", "params": {"width": 2}}),
    )
    assert [c["pattern"] for c in bn["method_plan"]["transfers"]] == ["reduce_scatter", "all_gather", "broadcast"]
    assert bn["time"]["comm_s_per_step"] > 0


def test_cli_plan_json_and_errors(profiles: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "local.yaml"
    config.write_text(json.dumps(_local_sgd()))
    assert main(["plan", str(config), "--set", "method_params.period=2", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["method_plan"]["round_lengths"] == [2, 2, 2, 1]
    assert main(["plan", str(config), "--set", "method_params.period=0"]) == 2
    assert "method_params.period" in capsys.readouterr().err


def test_plan_shows_compute_per_device_and_each_collectives_algorithm_and_cost() -> None:
    """Issue 23: the plan charges ``t_fixed + b / peak`` per rank (and shows the fixed part), plus the loop's host
    syncs (AR-SGD's once a step), and names the algorithm, protocol and cost of every collective it prices."""
    from distrepro.orchestration.plan import render
    from distrepro.timing.timemodel import CommCostModel

    config = repo_root() / "methods" / "decentdp" / "configs" / "allreduce.yaml"
    plan = build_plan(config)
    time = plan["time"]
    job = build_job(validate_config(plan["config"]), 0, check_requires=False)
    batch = plan["allocation"]["batch_sizes"][0]
    overhead = job.compute.overhead_s(0)
    assert overhead > 0  # the A40 profile declares a fixed step cost for Transformer-base
    assert time["compute"][0]["step_overhead_s"] == pytest.approx(overhead)
    assert job.compute.sync_s(0) > 0  # and the syncs of AR-SGD's loop
    expected = overhead + batch / job.compute.declared_samples_per_s(0) + job.compute.sync_s(0)
    assert time["compute"][0]["compute_s"] == pytest.approx(expected)
    (collective,) = time["collectives"]
    how = CommCostModel(job.profile).collective("all_reduce", range(job.world_size), collective["bytes"])
    assert (collective["algorithm"], collective["protocol"]) == (how.algorithm, how.protocol) == ("ring", "simple")
    assert collective["seconds"] == pytest.approx(how.seconds)
    assert "all_reduce of 252.4 MB over 16 ranks: ring / simple" in render(plan)


def test_training_section_counts_the_hosts_arithmetic_per_budget_unit() -> None:
    """The real work a run asks of the machine that trains it (what a GPU recipe is priced by): samples from
    the budget in any unit, the trained model's FLOPs per sample, evaluations as forward passes, every seed."""
    steps = build_plan(ROOT / "methods/qsr/configs/qsr.gpu.yaml")["training"]  # budget in steps: 1,758 x 4 x 128
    epochs = build_plan(ROOT / "methods/acid/configs/train16.gpu.yaml")["training"]  # budget in epochs: 14
    assert steps["samples_per_seed"] == 1758 * 4 * 128 and epochs["samples_per_seed"] == 14 * 50_000
    for t in (steps, epochs):
        train = t["samples_per_seed"] * t["train_flops_per_sample"]
        evals = t["evaluations_per_seed"] * 10_000 * t["train_flops_per_sample"] / 3
        assert t["evaluations_per_seed"] == 4 and t["flops_per_seed"] == pytest.approx(train + evals)
        assert t["flops_all_seeds"] == pytest.approx(5 * t["flops_per_seed"])
    assert build_plan(ROOT / "configs/quickstart.yaml")["training"]["device"] == "cpu"


def test_plan_groups_identical_ranks_and_charges_overlap_as_the_engine_does() -> None:
    """One compute entry per kind of rank (16 identical A40s: one entry), and with ``overlap`` the step is
    the emulated model's DDP buckets overlapped with backward (below compute + all-reduce); without it the plan says
    it is the no-overlap bound."""
    config = repo_root() / "methods" / "decentdp" / "configs" / "allreduce.yaml"
    bound = build_plan(config, ["method_params.overlap=false"])["time"]
    overlapped = build_plan(config, ["method_params.overlap=true"])["time"]
    assert len(bound["compute"]) == 1 and bound["compute"][0]["count"] == 16 and bound["compute"][0]["ranks"] == "0-15"
    assert "no overlap" in bound["assumes"] and "upper bound" in bound["assumes"]
    assert "overlapped with backward" in overlapped["assumes"] and overlapped["overlap"]["buckets"] > 1
    assert overlapped["slowest_compute_s_per_step"] < overlapped["step_s"] < bound["step_s"]


def test_a_compressor_plans_what_it_sends_from_the_parameter_shapes(
    profiles: Path, tmp_path: Path, with_test_plugins: Callable[..., Path]
) -> None:
    """A PowerSGD-like outside plugin sends rank-r factors, not the model: its plan (from
    ``PlanSetting.parameters``) is priced, cheaper than AR-SGD's all-reduce of the whole model, and the bytes a
    real run charges are the bytes it planned."""
    with_test_plugins("powersgd_probe")
    data = _local_sgd(method="powersgd_probe", method_params={"rank": 1}, budget={"steps": 2})
    plan = _plan(tmp_path, data)
    full = _plan(tmp_path, data | {"method": "ar_sgd", "method_params": {}})
    sent = sum(t["bytes"] * t["count"] for t in plan["method_plan"]["transfers"])
    model = full["method_plan"]["transfers"][0]["bytes"]
    assert 0 < sent < model / 2 and plan["method_plan"]["compression"] > 2
    assert 0 < plan["time"]["comm_s_per_step"] < full["time"]["comm_s_per_step"]
    assert plan["time"]["total_s"] == pytest.approx(2 * plan["time"]["step_s"])
    result = InProcessEngine().run(build_job(validate_config(data), 0))
    steps = result.final.step
    charged = result.final.workers[0].bytes_sent
    assert charged / steps == pytest.approx(sent, rel=1e-6)


def test_every_method_plan_is_typed_and_priced(profiles: Path, tmp_path: Path) -> None:
    """Every shipped method returns an ``api.MethodPlan`` whose transfers ``distrepro plan`` prices (gossip and
    ACiD included: asynchronous, each worker at its own pace)."""
    from distrepro.plugins.registry import methods

    for name in sorted(methods()):
        data = _local_sgd(method=name, method_params={}, profile="hetero-2fast-2slow", batch_size=8)
        data["budget"] = {"steps": 6}
        if name in ("deepspeed_real",):
            data["engine"] = "dist"
        plan = _plan(tmp_path, data)
        assert plan["plan_format"] == 2 and isinstance(plan["method_plan"], dict), name
        assert plan["method_plan"]["transfers"], name
        assert isinstance(plan["time"]["total_s"], float) and plan["time"]["total_s"] > 0, (name, plan["time"])


def test_a_plan_that_is_not_a_method_plan_is_one_error_naming_the_method(
    profiles: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The untyped dict of plan format 1 is refused with what to return instead, not priced as nothing."""
    from distrepro.errors import PluginError
    from distrepro.plugins.registry import get_method

    cls = get_method("ar_sgd").cls
    monkeypatch.setattr(cls, "plan", classmethod(lambda c, params, setting: {"comm": []}))
    with pytest.raises(PluginError, match=r"ar_sgd: Method.plan returned dict; it must return api.MethodPlan or None"):
        _plan(tmp_path, _local_sgd(method="ar_sgd", method_params={}))

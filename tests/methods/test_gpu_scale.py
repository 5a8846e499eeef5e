"""Issue 24, item 5: the gpu scale. Every ``*.gpu.yaml`` recipe validates and is priced by ``distrepro plan``; one
arm per paper trains two steps on the CPU on a tiny CIFAR-10 folder (``--set device=cpu``); ``--scale gpu``
re-decides accuracy and convergence claims only; on a machine with CUDA one arm trains a few steps on the GPU
and repeats itself bit for bit (marker ``gpu``, skipped elsewhere: CI never needs a GPU)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from clirun import run_cli
from imagefolders import write_fake_cifar

from distrepro.claims.papers import arm_config_path, arms_at_scale, find_paper
from distrepro.claims.schema import at_scale, claim_arms
from distrepro.config.overrides import parse_overrides
from distrepro.config.run_config import load_config
from distrepro.engine.inprocess import InProcessEngine
from distrepro.job.resolve import build_job
from distrepro.orchestration.plan import build_plan

ROOT = Path(__file__).resolve().parents[2]
RECIPES = sorted(ROOT.glob("methods/*/configs/*.gpu.yaml"))
PAPERS = ("qsr", "decentdp", "acid", "cadp", "chao")
#: (paper, recipe, overrides that pick the arm and shrink it to what two CPU steps on 80 images can take)
AER = 'method_params.topology="alternating-exp-ring"'
ARMS = [
    ("qsr", "methods/qsr/configs/qsr.gpu.yaml", ["schedule.warmup_steps=1"]),
    ("decentdp", "methods/decentdp/configs/accum.gpu.yaml", [AER, "schedule.warmup_steps=1"]),
    ("acid", "methods/acid/configs/train16.gpu.yaml", ['method_params.topology="ring"', "schedule.warmup_epochs=0"]),
    ("cadp", "methods/cadp/configs/cadp.gpu.yaml", ["method_params.micro_batch=[2, 2, 2, 2, 1, 1, 1, 1]"]),
    (
        "chao",
        "methods/chao_alloc/configs/1m-1to2.gpu.yaml",
        ['method_params.mode="static"', "method_params.global_batch=4"],
    ),
]


@pytest.fixture(scope="module")
def tiny_cifar(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("cifar")
    write_fake_cifar(root, per_batch=16, n_test=8)  # 80 training images, 8 test images, the real file format
    return root


def _tiny(root: Path, device: str = "cpu") -> list[str]:
    """Overrides that keep a recipe's method, profile, model and schedule but make it two steps on ``root``."""
    return [
        f"device={device}",
        f"dataset.root={root}",
        "dataset.params.verify_checksums=false",
        "model.params.width=4",
        "batch_size=2",
        "budget={steps: 2}",
        "eval={times: 1, batch_size: 8}",
        "seeds=[0]",
        "scale=gpu",
        "torch_threads=1",  # a width-4 ResNet on 2 images: more threads only wait on each other
    ]


def test_every_paper_has_gpu_recipes() -> None:
    papers = {p.parts[-3] for p in RECIPES}
    assert papers == {"qsr", "decentdp", "acid", "cadp", "chao_alloc"}


@pytest.mark.parametrize("recipe", RECIPES, ids=[f"{p.parts[-3]}/{p.name}" for p in RECIPES])
def test_gpu_recipe_validates_and_is_priced_by_plan(recipe: Path) -> None:
    cfg = load_config(recipe)
    assert cfg.device == "cuda" and cfg.dataset.name == "cifar10" and cfg.model.name == "resnet18_cifar"
    assert cfg.dataset.params.get("augment") is True and len(cfg.seeds) == 5
    plan = build_plan(recipe, [])  # no CIFAR-10 folder here: the plan describes the data without reading it
    assert plan["dataset"]["resolved_from"].startswith("declared shape")
    assert plan["dataset"]["train_size"] == 50_000 and plan["lr"]["total_steps"] >= 20  # C-ADP: one step a round
    assert plan["training"]["epochs_per_seed"] >= 4  # the short QSR arms: 4.5 epochs; the others 14-20
    time, training = plan["time"], plan["training"]
    assert (isinstance(time["total_s"], float) and time["total_s"] > 0) or time["why"] == "asynchronous"
    assert training["device"] == "cuda" and training["seeds"] == 5
    assert 3.2e9 < training["train_flops_per_sample"] < 3.4e9  # ResNet-18 CIFAR: 3.33 GFLOP (workloads.yaml)
    assert training["flops_all_seeds"] == pytest.approx(5 * training["flops_per_seed"])


def test_gpu_reproductions_re_decide_accuracy_and_convergence_claims_on_gpu_arms_only() -> None:
    for paper in PAPERS:
        info = find_paper(paper)
        assert info.spec is not None and info.path is not None
        available = arms_at_scale(info, "gpu")
        moved = [c for c in at_scale(info.spec, "gpu", available).claims if c.scale == "gpu"]
        assert moved, f"{paper}: no claim re-decided at gpu scale"
        for claim in moved:  # accuracy and convergence only: FLOPS per emulated second and idle shares stay
            assert claim.kind != "speedup" and set(claim_arms(claim)) <= available
            assert not str(getattr(claim, "metric", "")).startswith(("final/useful_flops", "final/non_compute"))
        for arm in available:  # the sibling of the arm's proxy config
            path = arm_config_path(info.path, arm, info.spec.setup.arms[arm].config, "gpu", None)
            assert path.name.endswith(".gpu.yaml")


@pytest.mark.parametrize(("paper", "recipe", "sets"), ARMS, ids=[a[0] for a in ARMS])
def test_one_gpu_arm_per_paper_trains_two_steps_on_the_cpu(
    paper: str, recipe: str, sets: list[str], tiny_cifar: Path
) -> None:
    cfg = load_config(ROOT / recipe, parse_overrides([*_tiny(tiny_cifar), *sets]))
    assert cfg.device == "cpu" and cfg.scale == "gpu"
    result = InProcessEngine().run(build_job(cfg, 0))
    assert result.final.step == 2 and 0.0 <= result.final.metrics["val_accuracy"] <= 1.0
    assert all(next(m.parameters()).device.type == "cpu" for m in result.models)


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the behaviour where CUDA is absent")
def test_reproducing_a_gpu_scale_without_cuda_is_one_line_and_logs_nothing(tmp_path: Path) -> None:
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    done = run_cli(["reproduce", "qsr", "--scale", "gpu", "--no-progress", "--no-report"], uri, ROOT)
    assert done.rc != 0 and "Traceback" not in done.err and len(done.error_lines) == 1, done.err
    line = done.error_lines[0]
    assert ".gpu.yaml: field 'device'" in line and "device: cuda asks for a GPU" in line
    from mlflow.tracking import MlflowClient

    client = MlflowClient(uri)
    experiments = [e.experiment_id for e in client.search_experiments()]
    assert not experiments or not client.search_runs(experiments)  # no umbrella run, no arm


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_a_gpu_arm_trains_on_cuda_and_repeats_itself(tiny_cifar: Path) -> None:
    """A²CiD² on the ring (16 workers, the asynchronous engine path, the gossip agent, the full-width ResNet-18):
    three steps on the GPU, twice; the replicas live on the GPU, the metrics are Python floats, and the two runs
    agree bit for bit (deterministic kernels, ``distrepro.hardware.device.deterministic_cuda``)."""
    sets = [*_tiny(tiny_cifar, "cuda"), "model.params.width=64", "batch_size=4", "budget={steps: 3}"]
    sets += ['method_params.topology="ring"', "schedule.warmup_epochs=0"]
    cfg = load_config(ROOT / "methods/acid/configs/train16.gpu.yaml", parse_overrides(sets))
    runs = [InProcessEngine().run(build_job(cfg, 0)) for _ in range(2)]
    for result in runs:
        assert all(next(m.parameters()).device.type == "cuda" for m in result.models)
        assert all(isinstance(v, float) for v in result.final.metrics.values())
    assert runs[0].final.metrics == runs[1].final.metrics
    for a, b in zip(runs[0].models, runs[1].models, strict=True):
        assert all(torch.equal(p, q) for p, q in zip(a.parameters(), b.parameters(), strict=True))

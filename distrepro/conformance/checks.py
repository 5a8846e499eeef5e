"""The checks every method plugin must pass, as functions a pytest test calls with a method's name.

Why functions in the package: ``distrepro test METHOD`` must run them from an installed wheel, where no
``tests/`` folder exists, and the repository's own generated tests call the very same code. Each check builds a
tiny run of the method's ``smoke_params`` (``api.Method.smoke_params``: values that make periodic logic happen
within 10 steps), else its defaults; a method that cannot run here (``skip``, a missing optional module,
``test_opt_outs``) is skipped with its reason.
"""

from __future__ import annotations

import importlib.util
import io
import math
from pathlib import Path
from typing import Any

import pytest
import torch

from distrepro import api
from distrepro.config.run_config import RunConfig, validate_config
from distrepro.hardware.cluster_layout import cluster_layout
from distrepro.hardware.profiles import load_profile
from distrepro.orchestration.campaign import run_campaign
from distrepro.plugins import registry
from distrepro.tracking.mlflow_client import make_client

NUM_CLASSES = 4
CHANCE = 1.0 / NUM_CLASSES
#: 4 ranks on 2 nodes, for methods whose default topology needs more than one node
TWO_NODES = "hetero-2fast-2slow"
#: the round trip's two ranks on two nodes, shipped beside this module (``distrepro test`` adds it as a root)
PAIR_PROFILE_FILE = Path(__file__).with_name("pair_profile.yaml")
PAIR_PROFILE = "conformance-pair-2"

SMOKE: dict[str, Any] = {
    "dataset": {
        "name": "synthetic",
        "params": {"num_classes": NUM_CLASSES, "noise": 1.0, "train_size": 512, "test_size": 256, "image_size": 8},
    },
    "batch_size": 16,
    "budget": {"steps": 10},
    "eval": {"times": 2},
    "emulated_workload": "resnet18_cifar_32",  # charged times of a few ms: distinct emulated-ms steps
    "torch_threads": 1,
    "seeds": [0],
}

#: the checkpoint round trip: 2 ranks on two nodes, a checkpoint every 2 of 4 steps, on the distributed engine
ROUND_TRIP: dict[str, Any] = {
    "dataset": {"name": "synthetic", "params": {"train_size": 256, "test_size": 64, "image_size": 8}},
    "batch_size": [8, 16],
    "budget": {"steps": 4},
    "eval": {"every_steps": 2},
    "engine": "dist",
    "dist": {"timeout_s": 60},
    "torch_threads": 1,
}


def smoke_params(cls: type[api.Method[Any]]) -> dict[str, Any]:
    """A method's ``smoke_params`` as ``method_params`` (the fields it sets), {} without."""
    return {} if cls.smoke_params is None else cls.smoke_params.model_dump(exclude_unset=True)


def _history(client: Any, run_id: str, key: str) -> list[tuple[int, float]]:
    return sorted((m.step, m.value) for m in client.get_metric_history(run_id, key))


def smoke_campaign(name: str, tracking_uri: str) -> None:
    """A tiny campaign (10 steps, 4 workers) must learn and be logged to MLflow with its timeline and artifacts."""
    import pandas as pd

    plugin = registry.methods()[name]
    run = {**SMOKE, "method": name, "name": f"smoke-{name}", "method_params": smoke_params(plugin.cls)}
    cfg = validate_config(run)
    method, profile = plugin.cls(plugin.cls.Params(**run["method_params"])), load_profile(cfg.profile)
    if method.skip(cluster_layout(profile)):  # e.g. a topology over nodes (Decent-DP's AER): try two nodes
        cfg = validate_config({**run, "profile": TWO_NODES})
        profile = load_profile(cfg.profile)
    reason = method.skip(cluster_layout(profile))
    if reason:
        pytest.skip(f"{name}: {reason}")

    result = run_campaign(cfg, show_progress=False, tracking_uri=tracking_uri)
    (cell,) = result.cells
    final = cell.result.final
    assert math.isfinite(final.metrics["train_loss"]) and math.isfinite(final.metrics["val_loss"])
    assert final.metrics["val_accuracy"] > CHANCE + 0.1, final.metrics
    assert final.step == 10 if plugin.cls.synchronous else final.step >= 10

    client = make_client(tracking_uri)
    logged = client.get_run(cell.run_id)
    assert logged.info.status == "FINISHED"
    tags = logged.data.tags
    assert tags["mlflow.parentRunId"] == result.parent_run_id
    assert tags["distrepro.method"] == name
    assert tags["distrepro.profile_sha256"] == load_profile(cfg.profile).digest()
    assert tags["git.commit"]  # a commit hash, or "unknown" outside a checkout: never missing
    assert client.get_run(result.parent_run_id).info.status == "FINISHED"

    evals = cell.result.evals
    assert [e.final for e in evals][-1]
    assert _history(client, cell.run_id, "val_accuracy") == sorted((e.step, e.metrics["val_accuracy"]) for e in evals)
    emulated = _history(client, cell.run_id, "emu_ms/val_accuracy")
    assert emulated == sorted((round(e.emulated_s * 1000), e.metrics["val_accuracy"]) for e in evals)
    assert len({step for step, _ in emulated}) == len(evals) and emulated[0][0] > 0  # real ms steps

    artifacts = {a.path for a in client.list_artifacts(cell.run_id)}
    assert {"timeline.csv", "evals.csv", "config.resolved.yaml", "profile.yaml"} <= artifacts
    local = client.download_artifacts(cell.run_id, "timeline.csv", str(Path.cwd()))
    timeline = pd.read_csv(io.StringIO(Path(local).read_text(encoding="utf-8")))
    assert list(timeline.columns) == ["rank", "kind", "start_s", "end_s", "step"]
    assert len(timeline) == len(cell.result.timeline) > 0
    assert set(timeline["rank"]) == {0, 1, 2, 3}
    assert set(timeline["kind"]) <= {"compute", "comm", "idle"} and "compute" in set(timeline["kind"])
    assert (timeline["end_s"] > timeline["start_s"]).all()


def _holds_tensor(value: Any) -> bool:
    if isinstance(value, torch.Tensor):
        return True
    if isinstance(value, (list, tuple)):
        return any(_holds_tensor(v) for v in value)
    if isinstance(value, dict):
        return any(_holds_tensor(v) for v in value.values())
    return False


def unsaved_tensor_attributes(method: api.Method[Any]) -> list[str]:
    """The method's attributes that hold tensors but are not in its ``state_dict()``: the default leaves every
    such attribute out (they usually alias the model), so a buffer of the method's own is lost on resume."""
    saved = set(method.state_dict())
    return sorted(k for k, v in vars(method).items() if k not in saved and _holds_tensor(v))


def differing_tensors(resumed: torch.nn.Module, clean: torch.nn.Module, atol: float = 1e-6) -> list[str]:
    """``name (max |diff| x)`` for every model tensor of the resumed run that is not the uninterrupted run's."""
    out = []
    mine, theirs = resumed.state_dict(), clean.state_dict()
    for key, value in mine.items():
        other = theirs[key]
        a, b = value.detach().double(), other.detach().double()
        if a.shape != b.shape or not torch.allclose(a, b, atol=atol):
            gap = (a - b).abs().max().item() if a.shape == b.shape else float("nan")
            out.append(f"{key} (max |diff| {gap:.3g})")
    return out


def _unsaved_after_a_short_run(cfg: RunConfig) -> list[str]:
    """Run the round trip's config two steps in-process and list what ``state_dict`` leaves out (the harness's
    view of the method's attributes after ``setup`` and a few steps)."""
    from distrepro.job.resolve import build_job
    from distrepro.orchestration.inspection import methods_after_training

    short = validate_config(
        {**cfg.model_dump(mode="json", exclude={"checkpoint"}), "engine": "inprocess", "budget": {"steps": 2}}
    )
    return unsaved_tensor_attributes(methods_after_training(build_job(short, 0))[0])


def checkpoint_round_trip(name: str, tracking_uri: str, ckpt: Path, profile: str = PAIR_PROFILE) -> None:
    """A lockstep method's state (``Method.state_dict``: optimizers, plain attributes, tensors it saves itself)
    survives a checkpoint: resumed from step 2, the run ends with the uninterrupted run's parameters and
    evaluation. A failure names the tensors that differ and the tensor-holding attributes ``state_dict`` left
    out. ``test_opt_outs["checkpoint"]`` leaves a method out, with its reason."""
    from distrepro.job import checkpoint_folders as checkpoint
    from distrepro.job.resolve import build_job
    from distrepro.orchestration.campaign import get_engine
    from distrepro.tracking.run_observer import MlflowRunSink
    from distrepro.tracking.runlog import RunLogger

    cls = registry.methods()[name].cls
    if not cls.synchronous:
        pytest.skip(f"{name}: asynchronous methods are not checkpointed")
    if cls.test_opt_outs.get("checkpoint"):
        pytest.skip(f"{name}: {cls.test_opt_outs['checkpoint']}")
    params = smoke_params(cls)
    run = {**ROUND_TRIP, "profile": profile, "method": name, "name": f"ckpt-{name}", "method_params": params}
    cfg = validate_config({**run, "checkpoint": {"every_steps": 2, "keep": 5, "dir": str(ckpt)}})
    reason = cls(cls.Params(**params)).skip(cluster_layout(load_profile(cfg.profile)))
    if reason:  # e.g. Decent-DP's alternating ring: two nodes of two ranks
        cfg = validate_config({**run, "profile": TWO_NODES, "batch_size": 8, **cfg.model_dump(include={"checkpoint"})})
        reason = cls(cls.Params(**params)).skip(cluster_layout(load_profile(cfg.profile)))
    missing = [m for m in cls.requires if importlib.util.find_spec(m) is None]
    if reason or missing:
        pytest.skip(f"{name}: {reason or f'needs {missing}'}")
    (clean,) = run_campaign(cfg, show_progress=False, tracking_uri=tracking_uri).cells
    half = checkpoint.step_dir(ckpt / clean.run_id, 2)
    assert checkpoint.latest_complete(ckpt / clean.run_id) is not None and half.is_dir()
    client = make_client(tracking_uri)
    second = client.create_run(client.get_run(clean.run_id).info.experiment_id)
    sink = MlflowRunSink(RunLogger(client, second.info.run_id))
    resumed = get_engine("dist").run_cell(build_job(cfg, 0), sink, resume_from=half)
    differ = differing_tensors(resumed.models[0], clean.result.models[0])
    if differ:
        unsaved = _unsaved_after_a_short_run(cfg)
        head = (
            f"state_dict() leaves out: {', '.join(unsaved)}"
            if unsaved
            else "resumed from step 2, other parameters than the uninterrupted run"
        )
        hint = (
            " (attributes holding tensors; override state_dict/load_state_dict to save them: "
            "docs/writing-a-method.md, 'Saving state')"
            if unsaved
            else f" (every tensor-holding attribute of {name} is in its state_dict())"
        )
        raise AssertionError(
            f"{head}{hint}; {name} resumed from step 2 ends with other parameters than the uninterrupted run: "
            f"{', '.join(differ[:8])}{' ...' if len(differ) > 8 else ''}"
        )
    assert resumed.final.step == clean.result.final.step == 4
    for key in ("val_loss", "val_accuracy"):
        assert resumed.final.metrics[key] == pytest.approx(clean.result.final.metrics[key], rel=1e-5, abs=1e-7)

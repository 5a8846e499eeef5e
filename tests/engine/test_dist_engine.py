"""The torch.distributed engine: real processes (gloo), file rendezvous, faults, equivalence."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import mlflow
import pytest
import torch
from conftest import PAIR_PROFILE

from distrepro.config.run_config import validate_config
from distrepro.engine.multiprocess.launch import DistEngine, diagnose
from distrepro.engine.multiprocess.pacing import Pacer, choose_dilation
from distrepro.engine.multiprocess.pairing import PairingCoordinator
from distrepro.errors import WorkerFailure
from distrepro.orchestration.campaign import run_campaign

REPO = Path(__file__).resolve().parents[2]


def _cfg(**over):
    base = {
        "method": "ar_sgd",
        "profile": "pair-2",
        "dataset": {"params": {"train_size": 256, "test_size": 128, "image_size": 8}},
        "budget": {"steps": 4},
        "eval": {"times": 2},
        "dist": {"timeout_s": 20},
    }
    base.update(over)
    return validate_config(base)


def _flat(model: torch.nn.Module) -> torch.Tensor:
    return torch.cat([p.detach().reshape(-1) for p in model.parameters()])


@pytest.mark.distributed
@pytest.mark.parametrize("method", ["local_sgd", "gossip"])
def test_baselines_run_and_log(profiles, mlflow_uri, method):
    cfg = _cfg(method=method, engine="dist", seeds=[0])
    result = run_campaign(cfg, show_progress=False)
    cell = result.cells[0]
    assert cell.result.final.metrics["val_loss"] == cell.result.final.metrics["val_loss"]  # not NaN
    run = mlflow.MlflowClient(mlflow_uri).get_run(cell.run_id)
    assert run.info.status == "FINISHED"
    assert run.data.tags["distrepro.engine"] == "dist"
    assert "val_accuracy" in run.data.metrics and "emu_ms/val_accuracy" in run.data.metrics
    assert run.data.tags["distrepro.backend"] == "gloo"
    if method == "gossip":
        assert cell.result.final.workers[0].bytes_sent > 0


def _faulty_root(tmp_path: Path) -> Path:
    root = tmp_path / "root"
    (root / "methods").mkdir(parents=True)
    os.symlink(REPO / "tests" / "_support" / "plugins" / "methods" / "faulty", root / "methods" / "faulty")
    os.symlink(REPO / "datasets", root / "datasets")
    os.symlink(REPO / "hardware_profiles", root / "hardware_profiles")
    return root


def _leftover_workers(job_marker: str) -> list[str]:
    out = subprocess.run(["ps", "-eo", "pid,args"], capture_output=True, text=True).stdout
    return [line for line in out.splitlines() if "distrepro.engine.multiprocess.worker" in line and job_marker in line]


@pytest.mark.distributed
@pytest.mark.parametrize(("mode", "words"), [("kill", "died"), ("raise", "injected failure"), ("hang", "hung")])
def test_failing_rank_is_named_and_run_marked_failed(profiles, mlflow_uri, tmp_path, monkeypatch, mode, words):
    monkeypatch.setenv("DISTREPRO_ROOT", str(_faulty_root(tmp_path)))
    cfg = _cfg(
        method="faulty",
        method_params={"mode": mode, "fail_rank": 1, "fail_step": 2},
        engine="dist",
        dist={"timeout_s": 8},
        budget={"steps": 6},
    )
    with pytest.raises(WorkerFailure) as info:  # a hang, not the collective timeout, would end at pytest's timeout
        run_campaign(cfg, show_progress=False)
    assert info.value.rank == 1
    assert words in str(info.value)
    runs = mlflow.search_runs(experiment_names=["distrepro/adhoc"], filter_string="tags.`distrepro.method` = 'faulty'")
    assert set(runs["status"]) == {"FAILED"}
    assert not _leftover_workers("distrepro-dist-")


def test_diagnose_names_dead_hung_and_raising_ranks(tmp_path):
    (tmp_path / "rank0.status.json").write_text(
        '{"rank": 0, "status": "error", "error": "DistBackendError: timed out"}'
    )
    assert diagnose(tmp_path, {0: 1, 1: -9}, 2) == (1, "rank 1 died (signal 9) without reporting an error")
    rank, msg = diagnose(tmp_path, {0: 1, 1: None}, 2)
    assert rank == 1 and "hung" in msg
    # rank 1's own error is the cause; rank 0 only lost its connection to it
    (tmp_path / "rank1.status.json").write_text(
        '{"rank": 1, "time": 2.0, "status": "error", "error": "ValueError: boom"}'
    )
    (tmp_path / "rank0.status.json").write_text(
        '{"rank": 0, "time": 1.0, "status": "error", "error": "RuntimeError: Connection closed by peer"}'
    )
    assert diagnose(tmp_path, {0: 1, 1: 1}, 2) == (1, "rank 1 raised ValueError: boom")
    # os._exit(0) in a plugin: exit 0 and no status, while the other rank lost its connection waiting for it
    (tmp_path / "rank1.status.json").unlink()
    assert diagnose(tmp_path, {0: 1, 1: 0}, 2) == (
        1,
        "rank 1 exited without finishing (exit code 0, no status written: os._exit in a plugin?)",
    )


def test_a_rank_dying_after_it_reported_success_does_not_fail_the_run(tmp_path, capsys):
    """DeepSpeed's extension can abort at process exit; a rank that already said "ok" has finished."""
    abort = [sys.executable, "-c", "import os; os.abort()"]
    procs = [subprocess.Popen([sys.executable, "-c", "pass"]), subprocess.Popen(abort)]
    (tmp_path / "rank1.status.json").write_text('{"rank": 1, "status": "ok"}')
    DistEngine()._watch(procs, tmp_path, 2, torchrun=False)
    assert "rank 1 died (signal 6) after reporting success" in capsys.readouterr().err
    (tmp_path / "rank1.status.json").unlink()  # the same death before reporting fails the run
    procs = [subprocess.Popen([sys.executable, "-c", "pass"]), subprocess.Popen(abort)]
    with pytest.raises(WorkerFailure, match="rank 1 died"):
        DistEngine()._watch(procs, tmp_path, 2, torchrun=False)


class _DictStore:
    def __init__(self) -> None:
        self.data: dict[str, str] = {}

    def set(self, key: str, value: str) -> None:
        self.data[key] = value


@pytest.mark.smoke
def test_pairing_coordinator_matches_ready_neighbours_and_releases_when_done():
    store = _DictStore()
    coord = PairingCoordinator(store, world_size=4)
    coord.handle({"rank": 0, "k": 0, "neighbours": [1, 3], "t": 1.0})
    assert coord.waiting.keys() == {0}
    coord.handle({"rank": 2, "k": 0, "neighbours": [1, 3], "t": 1.5})  # not a neighbour of 0: waits too
    assert coord.waiting.keys() == {0, 2}
    coord.handle({"rank": 1, "k": 0, "neighbours": [0, 2], "t": 2.0})  # pairs with 0 (first listed)
    assert store.data["pair/ans/1/0"] == '{"peer": 0, "t": 2.0}'
    assert store.data["pair/ans/0/0"] == '{"peer": 1, "t": 2.0}'
    coord.handle({"rank": 1, "done": True})
    coord.handle({"rank": 3, "done": True})
    assert store.data["pair/ans/2/0"] == '{"peer": -1, "t": 1.5}'  # all its neighbours finished
    assert not coord.waiting


@pytest.mark.smoke
def test_deadline_pacer_follows_virtual_time():
    pacer = Pacer(dilation=0.02)  # 1 virtual second = 20 ms wall
    pacer.start()
    for k in range(1, 6):
        pacer(float(k))
    wall, throttled = pacer.wall_s(), pacer.throttled_s()
    assert wall >= 0.1  # never early (how late depends on the machine's load: not asserted)
    assert throttled >= wall / 0.02 >= 5.0  # read after the wall time: at least as much throttled time
    assert choose_dilation([0.5, 3.0], 2.0) == 6.0
    with pytest.raises(ValueError):
        choose_dilation([0.0], 1.5)


def _clean_then_crash_and_resume(common: dict, tmp_path, mode: str, fail_step: int):
    """An uninterrupted campaign, the same campaign with rank 1 failing once at ``fail_step``, and its resume.

    Returns the clean cell, the resumed cell and the crashed campaign's parent run id."""
    clean = run_campaign(
        _cfg(method="faulty", name="clean", method_params={"mode": "none"}, **common), show_progress=False
    ).cells[0]
    crashing = _cfg(
        method="faulty",
        name="crashing",
        **common,
        method_params={"mode": mode, "fail_rank": 1, "fail_step": fail_step, "once_file": str(tmp_path / "x")},
    )
    with pytest.raises(WorkerFailure):
        run_campaign(crashing, show_progress=False)
    parents = mlflow.search_runs(
        experiment_names=["distrepro/adhoc"],
        filter_string="tags.`distrepro.campaign` = 'crashing' and attributes.status = 'FAILED'",
    )
    parent_id = parents[parents["tags.mlflow.parentRunId"].isna()].iloc[0]["run_id"]
    return clean, run_campaign(crashing, show_progress=False, resume=parent_id).cells[0], parent_id


def _checkpointed(tmp_path, **extra):
    """8 steps on the dist engine with a checkpoint every 2 steps (and ``extra`` fields)."""
    return {
        "engine": "dist",
        "budget": {"steps": 8},
        "eval": {"every_steps": 3},
        "checkpoint": {"every_steps": 2, "dir": str(tmp_path / "ckpt")},
        "dist": {"timeout_s": 8},
        **extra,
    }


@pytest.mark.distributed
def test_resume_after_a_killed_rank_reaches_the_uninterrupted_result(profiles, mlflow_uri, tmp_path, monkeypatch):
    monkeypatch.setenv("DISTREPRO_ROOT", str(_faulty_root(tmp_path)))
    clean, resumed, parent_id = _clean_then_crash_and_resume(
        _checkpointed(tmp_path), tmp_path, mode="kill", fail_step=5
    )
    assert resumed.run_id != clean.run_id
    assert torch.allclose(_flat(resumed.result.models[0]), _flat(clean.result.models[0]), atol=1e-6)
    assert resumed.result.final.metrics["val_loss"] == pytest.approx(clean.result.final.metrics["val_loss"], rel=1e-6)
    assert resumed.result.final.emulated_s == pytest.approx(clean.result.final.emulated_s, rel=1e-9)
    assert [e.step for e in resumed.result.evals] == [e.step for e in clean.result.evals]
    client = mlflow.MlflowClient(mlflow_uri)
    assert client.get_run(resumed.run_id).info.status == "FINISHED"
    assert client.get_run(parent_id).info.status == "FINISHED"


NOISE = 'noise: {compute_cv: 0.05, link_cv: 0.3, source: "[E] test: wide, so a redrawn factor shows"}\n'


@pytest.mark.distributed
def test_resume_on_a_noisy_profile_gives_the_uninterrupted_clocks_and_bytes(
    profiles, mlflow_uri, tmp_path, monkeypatch
):
    """Link noise is drawn per call of a pattern on a group, counted in the job's cost model: the count goes into
    the checkpoint, so the resumed run charges the factors the uninterrupted one charged (it redrew them from
    call 0 before). Compute noise is hashed from (rank, step) and needs no state."""
    (profiles / "pair-2-noisy.yaml").write_text(PAIR_PROFILE.replace("name: pair-2", "name: pair-2-noisy") + NOISE)
    monkeypatch.setenv("DISTREPRO_ROOT", str(_faulty_root(tmp_path)))
    common = _checkpointed(tmp_path, profile="pair-2-noisy")
    clean, resumed, _ = _clean_then_crash_and_resume(common, tmp_path, mode="kill", fail_step=5)
    fields = ("clock_s", "compute_s", "comm_s", "idle_s", "bytes_sent")

    def clocks(result):
        return [float(getattr(w, f)) for w in result.final.workers for f in fields]

    assert resumed.result.final.emulated_s == pytest.approx(clean.result.final.emulated_s, rel=1e-12)
    assert clocks(resumed.result) == pytest.approx(clocks(clean.result), rel=1e-12)
    assert [e.emulated_s for e in resumed.result.evals] == pytest.approx([e.emulated_s for e in clean.result.evals])
    # the noise is in play: the same run on the quiet profile charges other times
    quiet_cfg = _cfg(method="faulty", name="quiet", method_params={"mode": "none"}, **{**common, "profile": "pair-2"})
    quiet = run_campaign(quiet_cfg, show_progress=False).cells[0]
    assert quiet.result.final.emulated_s != pytest.approx(clean.result.final.emulated_s, rel=1e-3)


@pytest.mark.distributed
def test_resumed_adaptive_optimizer_state_reaches_the_uninterrupted_parameters(
    profiles, mlflow_uri, tmp_path, monkeypatch
):
    """Optimizer state is checkpointed with its tensors (moments, AccumAdam's window) and the schedule resumes.

    AccumAdamW only (its state is AdamW's plus a window): each variant costs three distributed campaigns."""
    optimizer = "accum_adamw"
    monkeypatch.setenv("DISTREPRO_ROOT", str(_faulty_root(tmp_path)))
    common = {
        "engine": "dist",
        "budget": {"steps": 6},
        "eval": {"every_steps": 6},
        "optimizer": {"name": optimizer, "lr": 0.01, "weight_decay": 0.01, "accum_iter": 3},
        "schedule": {"kind": "cosine", "warmup_steps": 2},
        "checkpoint": {"every_steps": 2, "dir": str(tmp_path / "ckpt")},
        "dist": {"timeout_s": 8},
    }
    clean, resumed, _ = _clean_then_crash_and_resume(common, tmp_path, mode="raise", fail_step=3)
    assert torch.allclose(_flat(resumed.result.models[0]), _flat(clean.result.models[0]), atol=1e-7)


@pytest.mark.smoke
def test_rank0_progress_reaches_the_launchers_display(tmp_path):
    from distrepro.engine.multiprocess.launch import ProgressFile, _forward_progress

    seen: list[tuple[float, float]] = []

    class Display:
        def on_progress(self, fraction: float, emulated_s: float) -> None:
            seen.append((fraction, emulated_s))

    path = tmp_path / "progress.json"
    _forward_progress(path, Display())  # nothing written yet: nothing shown, no error
    writer = ProgressFile(path)
    writer.on_progress(0.25, 1.5)
    writer.on_progress(0.3, 1.6)  # within half a second: skipped
    _forward_progress(path, Display())
    writer.on_progress(1.0, 6.0)  # the end is always written
    _forward_progress(path, Display())
    assert seen == [(0.25, 1.5), (1.0, 6.0)]


@pytest.mark.smoke
def test_rank0_evaluations_reach_the_launchers_log_lines(tmp_path):
    """Without a live bar, a distributed run prints one line per evaluation, as an in-process run does."""
    import io

    from distrepro.engine.multiprocess.launch import ProgressFile, _forward_progress
    from distrepro.job.results import EvalRecord
    from distrepro.orchestration.progress import ProgressObserver

    def record(step: int, acc: float, final: bool = False) -> EvalRecord:
        metrics = {"val_accuracy": acc, "val_loss": 1.0}
        return EvalRecord(step, step / 10, step * 8, step * 0.5, 0.1, metrics, workers=[], final=final)

    path, out = tmp_path / "progress.json", io.StringIO()
    shown_to = ProgressObserver("m · p · seed 0", None, None, stream=out, verbose=True)
    writer = ProgressFile(path)
    writer.on_eval(record(5, 0.25))
    shown = _forward_progress(path, shown_to)
    writer.on_eval(record(10, 0.5, final=True))
    shown = _forward_progress(path, shown_to, shown)
    assert shown == 2 and _forward_progress(path, shown_to, shown) == 2  # nothing shown twice
    lines = out.getvalue().splitlines()
    assert len(lines) == 2 and "step 5" in lines[0] and "val_acc 0.2500" in lines[0]
    assert lines[1].endswith("(final)") and "emulated 5.000s" in lines[1]

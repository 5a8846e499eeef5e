"""Checkpoints of a distributed run, so a failed run can continue where it stopped.

At a step boundary of a lockstep method every rank writes everything that determines the rest
of its run: model, method state (optimizer, counters), data-stream position, virtual clock
(with its timeline), byte counts, harness counters and random generator states; rank 0 adds
the evaluations logged so far. A checkpoint is complete when rank 0 has written the ``COMPLETE``
marker after a barrier, so a crash during writing never leaves a half checkpoint that looks
usable. Resuming restores all of it, so the resumed run reaches the same final parameters and
metrics as an uninterrupted run with the same seed.

Asynchronous methods have no common step boundary; they are not checkpointed.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

if TYPE_CHECKING:
    from suite.engine.dist_run import DistRun

MARKER = "COMPLETE"


def step_dir(root: Path, step: int) -> Path:
    return root / f"step{step:09d}"


def latest_complete(root: Path) -> Path | None:
    """The newest complete checkpoint under ``root`` (a run's checkpoint folder), or None."""
    if not root.is_dir():
        return None
    done = sorted(d for d in root.iterdir() if d.is_dir() and (d / MARKER).is_file())
    return done[-1] if done else None


def capture(run: DistRun) -> dict[str, Any]:
    w, c = run.worker, run.clock
    state: dict[str, Any] = {
        "model": run.model.state_dict(),
        "method": run.method.state_dict(),
        "stream": run.stream.state_dict() if hasattr(run.stream, "state_dict") else None,
        "allocation": run.alloc,
        "allocations": run.allocations,
        "epoch": run.epoch,
        "clock": {k: getattr(c, k) for k in ("t", "compute_s", "comm_s", "idle_s", "step", "spans")},
        "bytes": run.comm._bytes,
        "worker": {
            "train_state": dict(w.train_state),
            "records": dict(w.records),
            "gradients": w.gradients,
            "samples_computed": w.samples_computed,
            "last_loss": w.last_loss,
            "epoch_samples": w.epoch_samples,
            "epoch_compute_s": w.epoch_compute_s,
            "rng": w.rng.get_state(),
        },
        "schedule": {k: getattr(run.schedule, k) for k in ("steps", "samples", "gradients", "emulated_s")}
        | {"next_eval": run.schedule._next_eval_index},
        "loss": (run.loss_sum, run.loss_count),
        "torch_rng": torch.get_rng_state(),
    }
    if run.rank == 0:
        state["evals"] = run.evals
        state["target"] = (run.target.time_s, run.target.step)
    return state


def restore(run: DistRun, state: dict[str, Any]) -> None:
    from suite.engine.common import make_stream

    run.model.load_state_dict(state["model"])
    run.method.load_state_dict(state["method"])
    run.epoch = state["epoch"]
    run.alloc = state["allocation"]
    run.allocations = state["allocations"]
    run.stream = make_stream(run.job, run.alloc, run.epoch, run.rank)
    if state["stream"] is not None:
        run.stream.load_state_dict(state["stream"])
    for key, value in state["clock"].items():
        setattr(run.clock, key, value)
    run.comm._bytes = state["bytes"]
    ws = state["worker"]
    run.worker.update_state(**ws["train_state"])
    run.worker.records = ws["records"]
    for key in ("gradients", "samples_computed", "last_loss", "epoch_samples", "epoch_compute_s"):
        setattr(run.worker, key, ws[key])
    run.worker.rng.set_state(ws["rng"])
    sched = state["schedule"]
    for key in ("steps", "samples", "gradients", "emulated_s"):
        setattr(run.schedule, key, sched[key])
    run.schedule._next_eval_index = sched["next_eval"]
    run.loss_sum, run.loss_count = state["loss"]
    torch.set_rng_state(state["torch_rng"])
    if run.rank == 0:
        run.evals = state["evals"]
        run.target.time_s, run.target.step = state["target"]


def save(run: DistRun, root: Path, step: int, barrier: Any, keep: int) -> None:
    """Write this rank's part; after ``barrier`` rank 0 marks the checkpoint complete and prunes."""
    folder = step_dir(root, step)
    folder.mkdir(parents=True, exist_ok=True)
    tmp = folder / f"rank{run.rank}.pt.tmp"
    torch.save(capture(run), tmp)
    tmp.replace(folder / f"rank{run.rank}.pt")
    barrier()
    if run.rank == 0:
        (folder / MARKER).write_text(str(step))
        done = sorted(d for d in root.iterdir() if d.is_dir() and (d / MARKER).is_file())
        for old in done[:-keep]:
            shutil.rmtree(old, ignore_errors=True)


def load(run: DistRun, folder: Path) -> int:
    """Restore this rank from ``folder``; returns the step it continues from."""
    state = torch.load(folder / f"rank{run.rank}.pt", weights_only=False)
    restore(run, state)
    return int(state["worker"]["train_state"]["step"])

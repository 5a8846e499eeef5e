"""Checkpoints of a distributed run, so a failed run can continue where it stopped.

At a step boundary of a lockstep method every rank writes everything that determines the rest
of its run: model, method state (optimizer, counters), data-stream position, virtual clock
(with its timeline), byte counts, harness counters and random generator states; rank 0 adds
the evaluations logged so far. A checkpoint is complete when rank 0 has written the ``COMPLETE``
marker after a barrier, so a crash during writing never leaves a half checkpoint that looks
usable. Resuming restores all of it, so the resumed run reaches the same final parameters and
metrics as an uninterrupted run with the same seed.

Asynchronous methods have no common step boundary; they are not checkpointed. The content is the
harness loop's (:mod:`suite.engine.loop`), one file per rank; only the distributed engine writes
checkpoints so far (its ``Comm`` keeps the byte count restored here).
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

if TYPE_CHECKING:
    from suite.engine.loop import Harness, Slot

MARKER = "COMPLETE"


def step_dir(root: Path, step: int) -> Path:
    return root / f"step{step:09d}"


def latest_complete(root: Path) -> Path | None:
    """The newest complete checkpoint under ``root`` (a run's checkpoint folder), or None."""
    if not root.is_dir():
        return None
    done = sorted(d for d in root.iterdir() if d.is_dir() and (d / MARKER).is_file())
    return done[-1] if done else None


def capture(run: Harness, slot: Slot) -> dict[str, Any]:
    w, c = slot.worker, slot.worker.clock
    state: dict[str, Any] = {
        "model": w.model.state_dict(),
        "method": slot.method.state_dict(),
        "stream": slot.stream.state_dict() if hasattr(slot.stream, "state_dict") else None,
        "allocation": run.alloc,
        "allocations": run.allocations,
        "epoch": run.epoch,
        "clock": {k: getattr(c, k) for k in ("t", "compute_s", "comm_s", "idle_s", "step", "spans")},
        "bytes": w.comm._bytes,  # type: ignore[attr-defined]
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
        "loss": (slot.loss_sum, slot.loss_count),
        "torch_rng": torch.get_rng_state(),
    }
    if run.transport.reporter:
        state["evals"] = run.evals
        state["target"] = (run.target.time_s, run.target.step)
    return state


def restore(run: Harness, slot: Slot, state: dict[str, Any]) -> None:
    from suite.engine.common import make_stream

    worker = slot.worker
    worker.model.load_state_dict(state["model"])
    slot.method.load_state_dict(state["method"])
    run.epoch = state["epoch"]
    run.alloc = state["allocation"]
    run.allocations = state["allocations"]
    slot.stream = make_stream(run.job, state["allocation"], run.epoch, slot.rank)
    if state["stream"] is not None:
        slot.stream.load_state_dict(state["stream"])  # type: ignore[union-attr]
    for key, value in state["clock"].items():
        setattr(worker.clock, key, value)
    worker.comm._bytes = state["bytes"]  # type: ignore[attr-defined]
    ws = state["worker"]
    worker.update_state(**ws["train_state"])
    worker.records = ws["records"]
    for key in ("gradients", "samples_computed", "last_loss", "epoch_samples", "epoch_compute_s"):
        setattr(worker, key, ws[key])
    worker.rng.set_state(ws["rng"])
    sched = state["schedule"]
    for key in ("steps", "samples", "gradients", "emulated_s"):
        setattr(run.schedule, key, sched[key])
    run.schedule._next_eval_index = sched["next_eval"]
    slot.loss_sum, slot.loss_count = state["loss"]
    torch.set_rng_state(state["torch_rng"])
    if run.transport.reporter:
        run.evals = state["evals"]
        run.target.time_s, run.target.step = state["target"]


def save(run: Harness, slot: Slot, root: Path, step: int, barrier: Any, keep: int) -> None:
    """Write this rank's part; after ``barrier`` rank 0 marks the checkpoint complete and prunes."""
    folder = step_dir(root, step)
    folder.mkdir(parents=True, exist_ok=True)
    tmp = folder / f"rank{slot.rank}.pt.tmp"
    torch.save(capture(run, slot), tmp)
    tmp.replace(folder / f"rank{slot.rank}.pt")
    barrier()
    if slot.rank == 0:
        (folder / MARKER).write_text(str(step))
        done = sorted(d for d in root.iterdir() if d.is_dir() and (d / MARKER).is_file())
        for old in done[:-keep]:
            shutil.rmtree(old, ignore_errors=True)


def load(run: Harness, slot: Slot, folder: Path) -> int:
    """Restore this rank from ``folder``; returns the step it continues from."""
    state = torch.load(folder / f"rank{slot.rank}.pt", weights_only=False)
    restore(run, slot, state)
    return int(state["worker"]["train_state"]["step"])

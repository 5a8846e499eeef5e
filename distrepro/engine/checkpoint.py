"""Checkpoints of a distributed run, so a failed run can continue where it stopped.

At a step boundary of a lockstep method every rank writes everything that determines the rest
of its run: model, method state (optimizer, counters), data-stream position, virtual clock
(with its timeline), byte counts, the position of the cost model's link-noise stream, harness
counters and random generator states; rank 0 adds
the evaluations logged so far. A checkpoint is complete when rank 0 has written the ``COMPLETE``
marker after a barrier, so a crash during writing never leaves a half checkpoint that looks
usable. Resuming restores all of it, so the resumed run reaches the same final parameters and
metrics as an uninterrupted run with the same seed.

Asynchronous methods have no common step boundary; they are not checkpointed. The content is the
harness loop's (:mod:`distrepro.engine.loop`), one file per rank; only the distributed engine writes
checkpoints so far. Each piece (clock, worker, schedule, comm of either engine, the job's cost model,
data stream, method, model) saves and restores itself through ``state_dict()``/``load_state_dict()``;
nothing here reaches into another class's fields. A rank file written before the cost model was
saved (no ``cost`` entry) still loads: its run redraws link noise from the start of the stream, as
it did then.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import torch

from distrepro.api.method import Allocation
from distrepro.engine.run_setup import TargetTracker
from distrepro.engine.transport import Transport
from distrepro.engine.worker_slot import Slot
from distrepro.job.checkpoint_folders import MARKER, step_dir
from distrepro.job.resolve import Job
from distrepro.job.results import EvalRecord
from distrepro.timing.budget_schedule import TrainingSchedule

#: version of a rank file's layout: every piece's own state_dict() since 2
FORMAT = 2


@runtime_checkable
class Stateful(Protocol):
    """What a checkpoint asks of each piece it saves: its own state, and taking it back."""

    def state_dict(self) -> dict[str, Any]: ...

    def load_state_dict(self, state: dict[str, Any]) -> None: ...


def _stateful(obj: object, what: str) -> Stateful:
    if not isinstance(obj, Stateful):
        raise TypeError(f"{what} {type(obj).__name__} has no state_dict()/load_state_dict(): it cannot be checkpointed")
    return obj


class HarnessState(Protocol):
    """What a checkpoint saves and restores of the harness (:class:`distrepro.engine.loop.Harness`) besides its
    slots: a protocol, so that the loop imports checkpoints and not the other way round."""

    job: Job
    transport: Transport
    schedule: TrainingSchedule
    target: TargetTracker
    evals: list[EvalRecord]
    allocations: list[tuple[int, Allocation]]
    alloc: Allocation | None
    epoch: int


def capture(run: HarnessState, slot: Slot) -> dict[str, Any]:
    """This rank's checkpoint: every piece's own ``state_dict()``, plus what the harness itself counts."""
    w = slot.worker
    state: dict[str, Any] = {
        "format": FORMAT,
        "model": w.model.state_dict(),
        "method": slot.method.state_dict(),
        "stream": _stateful(slot.stream, "data stream").state_dict(),
        "allocation": run.alloc,
        "allocations": run.allocations,
        "epoch": run.epoch,
        "clock": w.clock.state_dict(),
        "comm": _stateful(w.comm, "comm").state_dict(),
        "cost": _stateful(run.job.cost, "cost model").state_dict(),
        "worker": w.state_dict(),
        "schedule": run.schedule.state_dict(),
        "loss": (slot.loss_sum, slot.loss_count),
        "torch_rng": torch.get_rng_state(),
    }
    if run.transport.reporter:
        state["evals"] = run.evals
        state["target"] = (run.target.time_s, run.target.step)
    return state


def restore(run: HarnessState, slot: Slot, state: dict[str, Any]) -> None:
    from distrepro.engine.run_setup import make_stream

    if state.get("format") != FORMAT:
        raise ValueError(f"checkpoint format {state.get('format')!r}, this version reads {FORMAT}: start the run over")
    worker = slot.worker
    worker.model.load_state_dict(state["model"])
    slot.method.load_state_dict(state["method"])
    run.epoch = state["epoch"]
    run.alloc = state["allocation"]
    run.allocations = state["allocations"]
    slot.stream = make_stream(run.job, state["allocation"], run.epoch, slot.rank)
    _stateful(slot.stream, "data stream").load_state_dict(state["stream"])
    worker.clock.load_state_dict(state["clock"])
    _stateful(worker.comm, "comm").load_state_dict(state["comm"])
    if "cost" in state:  # link-noise counts; absent from rank files written before they were saved
        _stateful(run.job.cost, "cost model").load_state_dict(state["cost"])
    worker.load_state_dict(state["worker"])
    run.schedule.load_state_dict(state["schedule"])
    slot.loss_sum, slot.loss_count = state["loss"]
    torch.set_rng_state(state["torch_rng"])
    if run.transport.reporter:
        run.evals = state["evals"]
        run.target.time_s, run.target.step = state["target"]


def save(run: HarnessState, slot: Slot, root: Path, step: int, barrier: Any, keep: int) -> None:
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


def load(run: HarnessState, slot: Slot, folder: Path) -> int:
    """Restore this rank from ``folder``; returns the step it continues from."""
    state = torch.load(folder / f"rank{slot.rank}.pt", weights_only=False)
    restore(run, slot, state)
    return int(state["worker"]["train_state"]["step"])

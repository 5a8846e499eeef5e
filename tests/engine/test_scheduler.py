"""The greenlet discrete-event scheduler: virtual-time order, failures, deadlocks, grad mode.

Workers here are plain callables that charge virtual compute time to their clock and park on
zero-cost engine events (``InProcessComm.event``) or on communication, so every expectation is a
statement about virtual times, never about real ones.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch

from distrepro.engine.clock import VirtualClock
from distrepro.engine.inprocess.comm import Fabric
from distrepro.engine.inprocess.scheduler import Scheduler
from distrepro.errors import DeadlockError, DistreproError, WorkerFailure
from distrepro.hardware.profiles import load_profile
from distrepro.timing.timemodel import CommCostModel

pytestmark = pytest.mark.smoke


def make(world: int) -> tuple[Scheduler, Fabric]:
    """A scheduler with ``world`` clocks and a fabric over the shipped 4-GPU profile (ranks < 4)."""
    clocks = [VirtualClock(r) for r in range(world)]
    sched = Scheduler(clocks)
    return sched, Fabric(sched, CommCostModel(load_profile("homogeneous-4")))


# ---------------------------------------------------------------------- virtual-time order


def test_events_are_handled_in_virtual_time_order_not_program_order() -> None:
    sched, fab = make(3)
    charges = [3.0, 1.0, 2.0]  # rank 0 is started first but is the last in virtual time
    order: list[int] = []

    def worker(rank: int) -> Callable[[], None]:
        def run() -> None:
            sched.clocks[rank].compute(charges[rank])
            fab.comms[rank].event(lambda: order.append(rank), f"mark {rank}")

        return run

    sched.run([worker(r) for r in range(3)])
    assert order == [1, 2, 0]
    assert [c.t for c in sched.clocks] == charges  # events are free


def test_interleaved_steps_follow_virtual_time_with_rank_tie_break() -> None:
    """Rank 0 steps every 1.0 s, rank 1 every 1.5 s: their events interleave by time; ties go to rank 0."""
    sched, fab = make(2)
    period = [1.0, 1.5]
    seen: list[tuple[float, int]] = []

    def worker(rank: int) -> Callable[[], None]:
        def run() -> None:
            for _ in range(4):
                sched.clocks[rank].compute(period[rank])
                t = sched.clocks[rank].t
                fab.comms[rank].event(lambda t=t: seen.append((t, rank)), "step")

        return run

    sched.run([worker(r) for r in range(2)])
    expected = [(1.0, 0), (1.5, 1), (2.0, 0), (3.0, 0), (3.0, 1), (4.0, 0), (4.5, 1), (6.0, 1)]
    assert seen == expected


def test_event_value_is_returned_to_the_worker_and_handler_runs_untracked() -> None:
    sched, fab = make(2)
    got: dict[int, object] = {}
    grad_in_handler: list[bool] = []

    def handler(rank: int) -> int:
        grad_in_handler.append(torch.is_grad_enabled())
        return rank * 10 + 7

    def worker(rank: int) -> Callable[[], None]:
        def run() -> None:
            got[rank] = fab.comms[rank].event(lambda: handler(rank), "value")

        return run

    sched.run([worker(r) for r in range(2)])
    assert got == {0: 7, 1: 17}
    assert grad_in_handler == [False, False]  # requests are handled under no_grad


def test_scheduler_call_outside_a_worker_is_refused() -> None:
    sched, fab = make(2)
    with pytest.raises(RuntimeError, match="outside its own worker"):
        fab.comms[0].event(lambda: None, "stray")
    with pytest.raises(ValueError, match="one target per rank"):
        sched.run([lambda: None])


# ---------------------------------------------------------------------- waves


def test_a_wave_is_done_together_before_any_request_and_each_gets_its_result() -> None:
    """Workers released by one event join one wave, handed over in rank order before any request is handled; a
    worker released by an event of its own is a wave of its own (the batched forward/backward's grouping)."""
    sched, fab = make(3)
    waves: list[list[int]] = []
    order: list[str] = []
    got: dict[tuple[int, int], int] = {}
    company: list[bool] = []

    def handler(wave: list[tuple[int, Any]]) -> list[Any]:
        waves.append([rank for rank, _ in wave])
        order.append("wave")
        return [10 * item for _, item in wave]

    sched.wave_handler = handler

    def worker(rank: int) -> Callable[[], None]:
        def run() -> None:
            company.append(sched.wave_has_company())
            got[(rank, 0)] = sched.join_wave(rank, rank)  # all three start together
            sched.clocks[rank].compute(1.0 + rank)
            fab.comms[rank].event(lambda: order.append(f"event {rank}"), f"mark {rank}")
            company.append(sched.wave_has_company())
            got[(rank, 1)] = sched.join_wave(rank, rank + 1)  # each released by its own event

        return run

    sched.run([worker(r) for r in range(3)])
    assert waves == [[0, 1, 2], [0], [1], [2]]
    assert order == ["wave", "event 0", "wave", "event 1", "wave", "event 2", "wave"]
    assert got == {(0, 0): 0, (1, 0): 10, (2, 0): 20, (0, 1): 10, (1, 1): 20, (2, 1): 30}
    assert company == [True, True, True, False, False, False]  # alone in a wave: nobody to wait for


def test_joining_a_wave_without_a_handler_is_refused() -> None:
    sched, _ = make(1)
    with pytest.raises(WorkerFailure, match="without a wave handler"):
        sched.run([lambda: sched.join_wave(0, None)])


# ---------------------------------------------------------------------- failures


def test_worker_raising_is_reported_with_its_rank() -> None:
    sched, fab = make(3)

    def ok(rank: int) -> Callable[[], None]:
        def run() -> None:
            sched.clocks[rank].compute(1.0)
            fab.comms[rank].event(lambda: None, "step")

        return run

    def bad() -> None:
        sched.clocks[2].compute(0.5)
        fab.comms[2].event(lambda: None, "step")  # fails after a park: inside a resumed greenlet
        raise ValueError("boom in the method")

    with pytest.raises(WorkerFailure) as info:
        sched.run([ok(0), ok(1), bad])
    assert info.value.rank == 2
    assert "worker rank 2 failed" in str(info.value)
    assert "ValueError: boom in the method" in str(info.value)
    assert isinstance(info.value, DistreproError)
    assert isinstance(info.value.__cause__, ValueError)


def test_worker_raising_before_its_first_park_is_reported() -> None:
    sched, _ = make(2)

    def bad() -> None:
        raise KeyError("missing")

    with pytest.raises(WorkerFailure, match="worker rank 1 failed: KeyError") as info:
        sched.run([lambda: None, bad])
    assert info.value.rank == 1


# ---------------------------------------------------------------------- deadlocks


def test_collective_that_a_member_never_joins_is_a_deadlock_naming_the_waiters() -> None:
    sched, fab = make(3)

    def waiter(rank: int) -> Callable[[], None]:
        def run() -> None:
            sched.clocks[rank].compute(0.25 * (rank + 1))
            fab.comms[rank].all_reduce(torch.ones(3))  # the world group; rank 2 never comes

        return run

    with pytest.raises(DeadlockError) as info:
        sched.run([waiter(0), waiter(1), lambda: None])
    msg = str(info.value)
    assert "rank 0 waits in all_reduce over ranks [0, 1, 2] at t=0.250000s" in msg
    assert "rank 1 waits in all_reduce over ranks [0, 1, 2] at t=0.500000s" in msg
    assert "rank 2 waits" not in msg
    assert "finished ranks: [2]" in msg


def test_two_workers_waiting_on_different_collectives_deadlock() -> None:
    """Rank 0 waits in a barrier of {0, 1} while rank 1 waits in one of {1, 2}, and rank 2 in {0, 2}."""
    sched, fab = make(3)
    groups = [(0, 1), (1, 2), (0, 2)]

    def worker(rank: int) -> Callable[[], None]:
        def run() -> None:
            comm = fab.comms[rank]
            comm.barrier(comm.new_group(groups[rank]))

        return run

    with pytest.raises(DeadlockError) as info:
        sched.run([worker(r) for r in range(3)])
    msg = str(info.value)
    for rank, group in enumerate(groups):
        assert f"rank {rank} waits in barrier over ranks {list(group)}" in msg
    assert "finished ranks: []" in msg


def test_exchange_with_a_peer_that_never_answers_is_a_deadlock() -> None:
    sched, fab = make(2)

    def asker() -> None:
        fab.comms[0].exchange(1, torch.zeros(2))

    def other() -> None:
        sched.clocks[1].compute(1.0)  # parks after rank 0 asked, then leaves without answering
        fab.comms[1].event(lambda: None, "step")

    with pytest.raises(DeadlockError) as info:
        sched.run([asker, other])
    msg = str(info.value)
    assert "rank 0 waits in exchange with rank 1 at t=0.000000s" in msg
    assert "finished ranks: [1]" in msg


def test_cyclic_exchanges_deadlock_and_name_every_waiter() -> None:
    sched, fab = make(3)

    def worker(rank: int) -> Callable[[], None]:
        def run() -> None:
            fab.comms[rank].exchange((rank + 1) % 3, torch.zeros(1))

        return run

    with pytest.raises(DeadlockError) as info:
        sched.run([worker(r) for r in range(3)])
    msg = str(info.value)
    for rank in range(3):
        assert f"rank {rank} waits in exchange with rank {(rank + 1) % 3}" in msg


# ---------------------------------------------------------------------- grad mode


def test_grad_mode_is_restored_per_worker_across_switches() -> None:
    """Rank 0 parks inside ``torch.no_grad()``; rank 1 runs meanwhile and must still get gradients."""
    sched, fab = make(2)
    log: dict[str, bool] = {}
    grads: dict[int, torch.Tensor] = {}

    def rank0() -> None:
        with torch.no_grad():
            fab.comms[0].event(lambda: None, "park in no_grad")
            log["r0 resumed inside no_grad"] = torch.is_grad_enabled()
            fab.comms[0].event(lambda: None, "park again")
            log["r0 after second park"] = torch.is_grad_enabled()
        log["r0 after no_grad"] = torch.is_grad_enabled()
        w = torch.ones(3, requires_grad=True)
        (w * 2).sum().backward()
        assert w.grad is not None
        grads[0] = w.grad

    def rank1() -> None:
        sched.clocks[1].compute(0.5)  # after rank 0's first park in virtual time
        log["r1 at start"] = torch.is_grad_enabled()
        w = torch.ones(2, requires_grad=True)
        loss = (w * w).sum()
        fab.comms[1].event(lambda: None, "park between forward and backward")
        log["r1 resumed"] = torch.is_grad_enabled()
        loss.backward()
        assert w.grad is not None
        grads[1] = w.grad

    outer = torch.is_grad_enabled()
    sched.run([rank0, rank1])
    assert log == {
        "r0 resumed inside no_grad": False,
        "r0 after second park": False,
        "r0 after no_grad": True,
        "r1 at start": True,
        "r1 resumed": True,
    }
    assert torch.equal(grads[0], torch.full((3,), 2.0))
    assert torch.equal(grads[1], torch.full((2,), 2.0))
    assert torch.is_grad_enabled() == outer


def test_outer_grad_mode_is_restored_after_a_failure() -> None:
    sched, fab = make(2)

    def rank0() -> None:
        torch.set_grad_enabled(False)  # a worker that switches grad off and then dies
        fab.comms[0].event(lambda: None, "park")
        raise RuntimeError("died")

    assert torch.is_grad_enabled()
    with pytest.raises(WorkerFailure):
        sched.run([rank0, lambda: None])
    assert torch.is_grad_enabled()


@pytest.mark.parametrize("outer", [True, False])
def test_outer_grad_mode_survives_workers_left_parked_inside_grad_contexts(outer: bool) -> None:
    """A deadlock leaves rank 0 parked inside ``no_grad`` and rank 1 inside ``enable_grad``.

    Ending the run unwinds those parked workers (their context managers restore the modes they
    saw on entry); the caller's grad mode must still be what it was before ``run``.
    """
    sched, fab = make(2)

    def rank0() -> None:
        with torch.no_grad():
            fab.comms[0].exchange(1, torch.zeros(1))  # rank 1 never answers

    def rank1() -> None:
        torch.set_grad_enabled(False)
        with torch.enable_grad():
            fab.comms[1].barrier(fab.comms[1].new_group([0, 1]))  # rank 0 never comes

    with torch.set_grad_enabled(outer):
        with pytest.raises(DeadlockError):
            sched.run([rank0, rank1])
        assert torch.is_grad_enabled() == outer

"""Checkpoint content goes through each piece's ``state_dict()``: a piece restored from a state continues
exactly (bitwise) as the piece it was taken from."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from test_inprocess_comm import Net

from distrepro.api.method import Batch
from distrepro.config.run_config import Budget, EvalSchedule
from distrepro.engine import checkpoint
from distrepro.engine.clock import VirtualClock
from distrepro.engine.harness_worker import HarnessWorker
from distrepro.engine.run_setup import EmptyStream
from distrepro.hardware.profiles import load_profile
from distrepro.timing.budget_schedule import TrainingSchedule
from distrepro.timing.timemodel import CommCostModel

pytestmark = pytest.mark.smoke


def _all_reduces(net: Net, rounds: int) -> None:
    def body(rank: int, comm, clock: VirtualClock) -> None:
        for i in range(rounds):
            clock.compute(0.001 * (rank + 1))  # unequal compute: someone idles at every all-reduce
            comm.all_reduce(torch.full((1000,), float(rank + i)))

    net.run(body)


def test_a_restored_clock_and_in_process_comm_continue_as_the_uninterrupted_ones(tmp_path: Path) -> None:
    straight = Net(tmp_path)
    _all_reduces(straight, 2)
    states = [
        (c.state_dict(), comm.state_dict()) for c, comm in zip(straight.clocks, straight.fabric.comms, strict=True)
    ]
    _all_reduces(straight, 2)

    resumed = Net(tmp_path)
    for (clock_state, comm_state), clock, comm in zip(states, resumed.clocks, resumed.fabric.comms, strict=True):
        clock.load_state_dict(clock_state)
        comm.load_state_dict(comm_state)
    _all_reduces(resumed, 2)

    assert [c.state_dict() for c in resumed.clocks] == [c.state_dict() for c in straight.clocks]
    assert resumed.bytes_sent() == straight.bytes_sent() and min(straight.bytes_sent()) > 0


def test_a_restored_schedule_reaches_the_same_evaluation_points() -> None:
    def schedule() -> TrainingSchedule:
        return TrainingSchedule(Budget(steps=12), EvalSchedule(every_steps=3), dataset_size=100, world_size=4)

    def drive(s: TrainingSchedule, steps: int) -> list[bool]:
        due = []
        for _ in range(steps):
            s.record_iteration(8, s.emulated_s + 0.5)
            due.append(s.eval_due())
        return due

    straight = schedule()
    drive(straight, 5)
    state = straight.state_dict()
    rest = drive(straight, 7)
    resumed = schedule()
    resumed.load_state_dict(state)
    assert drive(resumed, 7) == rest and resumed.state_dict() == straight.state_dict()
    assert resumed.budget_spent()


def _worker() -> HarnessWorker:
    torch.manual_seed(0)
    model = torch.nn.Linear(3, 2)
    return HarnessWorker(1, 2, model, None, VirtualClock(1), lambda r, n, i, t: 0.25 * n, ("t",))  # type: ignore[arg-type]


def test_a_restored_worker_keeps_its_counters_records_and_generator() -> None:
    straight = _worker()
    batch = Batch(torch.randn(4, 3), torch.tensor([0, 1, 1, 0]))
    straight.forward_backward(batch)
    straight.record("local_steps", 3.0)
    straight.update_state(step=1, epoch=0.04, samples=4)
    state = straight.state_dict()
    draws = torch.rand(5, generator=straight.rng)

    resumed = _worker()
    resumed.load_state_dict(state)
    assert torch.equal(torch.rand(5, generator=resumed.rng), draws)
    assert dict(resumed.train_state) == dict(straight.train_state)
    assert (resumed.gradients, resumed.samples_computed, resumed.records) == (1, 4, {"local_steps": 3.0})
    assert resumed.last_loss == straight.last_loss and resumed.epoch_compute_s == straight.epoch_compute_s


def test_an_empty_stream_checkpoints_and_an_old_format_is_refused() -> None:
    stream = EmptyStream(Batch(torch.zeros(2, 3), torch.zeros(2, dtype=torch.long)))
    assert isinstance(stream, checkpoint.Stateful) and stream.state_dict() == {}
    with pytest.raises(ValueError, match="checkpoint format None"):
        checkpoint.restore(None, None, {"model": {}})  # type: ignore[arg-type]


def _noisy_calls(cost: CommCostModel) -> list[float]:
    """Calls of three patterns on two groups, as a step of a method might make them."""
    return [
        cost.ring_all_reduce(range(8), 44.9e6),
        cost.ring_all_reduce([0, 1], 1e6),
        cost.exchange(5, 0, 1e6),
        cost.broadcast(range(8), 3, 2e6),
    ]


def test_a_restored_cost_model_draws_the_link_noise_the_uninterrupted_one_draws() -> None:
    """Link-noise factors are counted per (pattern, group): the count is the model's state, so a checkpoint
    (``capture`` saves ``job.cost.state_dict()``) carries it and a resumed run redraws no factor."""
    profile = load_profile("cadp-ijcai25")
    assert profile.noise is not None and profile.noise.link_cv > 0

    def model() -> CommCostModel:
        return CommCostModel(profile, seed_parts=("ckpt", "link"))

    straight = model()
    for _ in range(3):
        _noisy_calls(straight)
    state = straight.state_dict()
    rest = [_noisy_calls(straight) for _ in range(3)]

    resumed = model()
    resumed.load_state_dict(state)
    assert [_noisy_calls(resumed) for _ in range(3)] == rest
    assert resumed.state_dict() == straight.state_dict()
    assert [_noisy_calls(model()) for _ in range(3)] != rest  # a fresh count would redraw the first factors

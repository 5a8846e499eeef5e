"""The replay of one run at many settings at once (lanes) gives bit for bit the one-setting-at-a-time replay.

Built on the tiny 3-rank profile (two GPUs with a speed change, a CPU with jitter and stragglers behind a NIC),
with NCCL's contention switched on so that the buckets' all-reduces are settled against backward, and on arms whose
allocation moves with the device speeds (Chao's adaptive split) or not (AR-SGD): the settings differ in every
ranged figure, so the lanes differ in their batches, their clocks and their contention debts.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml
from sensitivity_setups import TINY_PROFILE, _config

from distrepro.config.run_config import validate_config
from distrepro.job.resolve import Job, build_job
from distrepro.sensitivity import lane_noise
from distrepro.sensitivity import lanes as lanes_module
from distrepro.sensitivity.analytic import simulate
from distrepro.sensitivity.lane_contention import Diverged
from distrepro.sensitivity.lanes import simulate_lanes
from distrepro.sensitivity.retime import MIN_LANES, RetimedRun, Retimer, has_noise, memo_key
from distrepro.sensitivity.space import build_space, latin_hypercube, profile_variables

ARMS = {
    "ar_sgd_overlap": ("ar_sgd", {"weighting": "equal", "overlap": True}),
    "ar_sgd_serial": ("ar_sgd", {"weighting": "samples", "overlap": False}),
    "chao_adaptive": ("chao_alloc", {"mode": "adaptive", "global_batch": 34, "overlap": True}),
    "cadp": ("cadp", {"micro_batch": [16, 16, 2], "round_epochs": 1, "warmup_steps": 2}),
}


def _profile(
    folder: Path, contention: bool, link_cv: float = 0.0, host_syncs: bool = False, gpu_cv: float = 0.0
) -> str:
    data: dict[str, Any] = copy.deepcopy(TINY_PROFILE)
    data["name"] = "tiny-lanes"
    if host_syncs:  # the GPUs' fixed costs, host floor and loop syncs, all moved by the overhead factor
        data["schema_version"] = 2
        gpu = data["nodes"][0]["devices"][0]
        workload = next(iter(gpu["throughput_samples_per_s"]))
        gpu["step_overhead_ms"], gpu["step_floor_ms"] = {workload: 2.0}, {workload: 30.0}
        gpu["host_sync_ms"] = {workload: {"per_step": 1.5, "per_bucket": 4.0}}
        gpu["ranges"]["overhead"] = {"low": 0.5, "high": 1.5, "reason": "test"}
    if link_cv or gpu_cv:
        # every charge times its own lognormal factor (C-ADP's cluster), each GPU's step times its own speed: both
        # drawn per seed, not per setting
        data["noise"] = {"link_cv": link_cv, "gpu_cv": gpu_cv, "source": "[E] test"}
    if contention:  # NCCL: the overlapped all-reduces slow backward (a sweep variable), settled at every wait
        data["framework"] = {"backend": "nccl", "contention": 0.2, "source": "[E] test"}
    path = folder / f"{data['name']}.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return str(path)


def _runs(profile: str, arm: str, seeds: tuple[int, ...] = (0, 1)) -> list[RetimedRun]:
    method, params = ARMS[arm]
    cfg = validate_config(_config(profile, method, params, budget={"epochs": 3}))
    out = []
    for seed in seeds:
        job = build_job(cfg, seed)
        out.append(RetimedRun(f"{arm}-{seed}", arm, job, memo_key(job, seed), 1.0, None))
    return out


def _settings(runs: list[RetimedRun], n: int = 6) -> list[dict[str, float]]:
    space = build_space(profile_variables([runs[0].job.profile]), [])
    return [space.central(), {}, *(space.setting(row) for row in latin_hypercube(n, len(space.variables), 3))]


@pytest.mark.parametrize("arm", list(ARMS))
def test_every_setting_of_every_seed_in_one_pass_equals_the_replay_of_each(arm: str, tmp_path: Path) -> None:
    runs = _runs(_profile(tmp_path, contention=True), arm)
    settings = _settings(runs)
    together = Retimer(runs)
    together.prefetch(settings)
    assert all(together._at(run, s)[1] is None for run in runs for s in settings)  # filled by the lanes
    assert together.simulations == len(runs) * len(settings)
    alone = Retimer(_runs(_profile(tmp_path, contention=True), arm))
    for run, other in zip(together.runs, alone.runs, strict=True):
        for setting in settings:
            assert together.timing(run, setting) == alone.timing(other, setting)  # every float, bit for bit
    assert together.simulations == len(runs) * len(settings)  # nothing was replayed a second time


def test_the_lanes_are_the_scalar_replay_on_a_cluster_without_contention(tmp_path: Path) -> None:
    runs = _runs(_profile(tmp_path, contention=False), "chao_adaptive", seeds=(4,))
    retimer = Retimer(runs)
    jobs = [job for s in _settings(runs) if (job := retimer._at(runs[0], s)[1]) is not None]
    assert len(jobs) == 8
    assert runs[0].prober is not None
    assert simulate_lanes(jobs, runs[0].prober) == [simulate(job, runs[0].prober) for job in jobs]


def test_the_lanes_charge_the_loops_host_syncs_as_the_replay_does(tmp_path: Path) -> None:
    runs = _runs(_profile(tmp_path, contention=True, host_syncs=True), "ar_sgd_overlap", seeds=(2,))
    assert runs[0].job.compute.sync_s(0) == 1.5e-3  # AR-SGD's loop syncs once a step
    retimer = Retimer(runs)
    settings = _settings(runs)
    jobs = [job for s in settings if (job := retimer._at(runs[0], s)[1]) is not None]
    assert len({job.compute.sync_s(0) for job in jobs}) > 2  # the overhead factor moves the syncs with the floor
    assert runs[0].prober is not None and len(jobs) == len(settings)
    assert simulate_lanes(jobs, runs[0].prober) == [simulate(job, runs[0].prober) for job in jobs]


def _reassociated_piece(self: Any, rank: int, fraction: float, last: bool) -> None:
    """``_Clocks.piece`` with ``dt - backward + backward * fraction`` as ``dt - (backward - backward * fraction)``:
    the same in real numbers, not in floats."""
    state = self._fb[rank]
    if state is None:
        return
    dt, backward, done = state
    target = dt if last else dt - (backward - backward * fraction)
    self.t[rank] = self.t[rank] + lanes_module.pymax(0.0, target - done)
    state[2] = target
    if last:
        self.contention[rank].end(self.t[rank], self.slack[rank])


def test_a_reassociated_operation_in_the_lanes_shows(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The equality above is not vacuous: one sum taken in another order changes the low bits, and the result."""
    runs = _runs(_profile(tmp_path, contention=True), "ar_sgd_overlap", seeds=(0,))
    retimer = Retimer(runs)
    jobs = [job for s in _settings(runs) if (job := retimer._at(runs[0], s)[1]) is not None]
    assert runs[0].prober is not None
    scalar = [simulate(job, runs[0].prober) for job in jobs]
    assert simulate_lanes(jobs, runs[0].prober) == scalar
    monkeypatch.setattr(lanes_module._Clocks, "piece", _reassociated_piece)
    assert simulate_lanes(jobs, runs[0].prober) != scalar


def test_settings_whose_budgets_end_apart_are_replayed_one_by_one(tmp_path: Path) -> None:
    """A budget in emulated seconds ends at another iteration on faster hardware: the lanes refuse, and prefetch
    leaves those settings to the scalar replay, with the same result."""
    profile = _profile(tmp_path, contention=False)
    cfg = validate_config(_config(profile, "ar_sgd", {"overlap": False}, budget={"emulated_seconds": 0.5}))
    job = build_job(cfg, 0)
    run = RetimedRun("r", "a", job, (cfg.model_dump_json(exclude={"seeds"}), 0), 1.0, None)
    retimer = Retimer([run])
    settings = _settings([run])
    jobs = [j for s in settings if (j := retimer._at(run, s)[1]) is not None]
    assert run.prober is not None
    with pytest.raises(Diverged, match="budgets"):
        simulate_lanes(jobs, run.prober)
    retimer.prefetch(settings)
    assert retimer.simulations == 0  # nothing memoised by the lanes
    assert [retimer.timing(run, s) for s in settings] == [simulate(j, run.prober) for j in jobs]


def test_the_lanes_draw_each_seeds_noise(tmp_path: Path) -> None:
    """Two seeds' lanes at one setting: each draws its own jitter and stragglers, as its scalar replay does."""
    runs = _runs(_profile(tmp_path, contention=False), "ar_sgd_serial", seeds=(0, 1))
    assert has_noise(runs[0].job.profile)  # jitter and stragglers on the CPU
    retimer = Retimer(runs)
    jobs = [job for run in runs if (job := retimer._at(run, {})[1]) is not None]
    assert runs[0].prober is not None and runs[0].prober is runs[1].prober
    first, second = simulate_lanes(jobs, runs[0].prober)
    assert first.emulated_s != second.emulated_s
    assert [first, second] == [simulate(job, runs[0].prober) for job in jobs]


def test_a_few_lanes_are_left_to_the_replay_of_each(tmp_path: Path) -> None:
    runs = _runs(_profile(tmp_path, contention=False), "ar_sgd_serial", seeds=(0, 1))
    retimer = Retimer(runs)
    retimer.prefetch([{}, {"gpu.speed": 1.5}])  # 4 lanes: fewer than MIN_LANES
    assert retimer.simulations == 0 and MIN_LANES > 4


@pytest.mark.parametrize("arm", ["cadp", "ar_sgd_overlap"])
def test_on_a_noisy_link_every_lane_draws_the_factors_of_its_replay(arm: str, tmp_path: Path) -> None:
    """Link noise (C-ADP's asynchronous server receive, AR-SGD's bucket all-reduces): each seed's factors are drawn
    once for its settings, each charge is the setting's noise-free one times them, bit for bit the replay of each."""
    runs = _runs(_profile(tmp_path, contention=True, link_cv=0.3), arm)
    assert runs[0].job.cost.noisy
    settings = _settings(runs)
    together = Retimer(runs)
    together.prefetch(settings)
    assert all(together._at(run, s)[1] is None for run in runs for s in settings)  # filled by the lanes
    alone = Retimer(_runs(_profile(tmp_path, contention=True, link_cv=0.3), arm))
    timings = [[together.timing(run, s) for s in settings] for run in together.runs]
    assert timings == [[alone.timing(run, s) for s in settings] for run in alone.runs]
    assert timings[0][0].emulated_s != timings[1][0].emulated_s  # the seeds' links are noisy apart


def test_a_noisy_lane_drawing_one_factor_for_every_seed_shows(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The equality above is not vacuous: lanes that share the first seed's link factors are not their replay."""
    runs = _runs(_profile(tmp_path, contention=False, link_cv=0.3), "cadp", seeds=(0, 1, 2))
    prober = Retimer(runs).runs[0].prober
    assert prober is not None

    def jobs() -> list[Job]:  # fresh cost models: a replay advances its model's draw counts
        retimer = Retimer(runs)
        return [job for run in runs if (job := retimer._at(run, {})[1]) is not None]

    scalar = [simulate(job, prober) for job in jobs()]
    assert len({t.emulated_s for t in scalar}) == 3
    assert simulate_lanes(jobs(), prober) == scalar
    monkeypatch.setattr(lane_noise, "_draw_key", lambda job: job.cost.profile.noise.link_cv)
    assert simulate_lanes(jobs(), prober) != scalar


def test_each_gpus_own_speed_is_charged_in_every_lane_as_in_its_replay(tmp_path: Path) -> None:
    """``noise.gpu_cv``: each seed's GPUs are drawn once, each lane's step charges its seed's draw on the GPU part,
    bit for bit the replay of each; and the draw moves the times (the equality is not of two runs that ignore it).
    Chao's adaptive split: its GPUs, not the tiny profile's slow CPU, set the step."""
    arm = "chao_adaptive"
    runs = _runs(_profile(tmp_path, contention=True, gpu_cv=0.2, host_syncs=True), arm)
    assert has_noise(runs[0].job.profile)
    assert runs[0].job.compute.gpu_speed_factor(0) != runs[1].job.compute.gpu_speed_factor(0)
    settings = _settings(runs)
    together = Retimer(runs)
    together.prefetch(settings)
    assert all(together._at(run, s)[1] is None for run in runs for s in settings)  # filled by the lanes
    alone = Retimer(_runs(_profile(tmp_path, contention=True, gpu_cv=0.2, host_syncs=True), arm))
    timings = [[together.timing(run, s) for s in settings] for run in together.runs]
    assert timings == [[alone.timing(run, s) for s in settings] for run in alone.runs]
    without = Retimer(_runs(_profile(tmp_path, contention=True, host_syncs=True), arm))
    assert timings[0][0].emulated_s != without.timing(without.runs[0], settings[0]).emulated_s

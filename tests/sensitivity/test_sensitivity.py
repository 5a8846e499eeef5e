"""The sensitivity sweep: analytical times equal the engine's, designs, a hand-computed flip point, the report.

Tiny configs (8 px synthetic images, a narrow small CNN, a 3-rank profile with a NIC, jitter, a
straggler and a speed change) so the engine runs take about a second each; the sweep itself runs
on two hand-built runs and never trains.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml
from sensitivity_setups import FLIP_PAPER, FLIP_PROFILE, SPEED, TINY_PROFILE, WORKLOAD, _config, _flip_setup

from distrepro.claims.papers import PaperInfo
from distrepro.claims.schema import validate_paper
from distrepro.config.run_config import validate_config
from distrepro.engine.inprocess.run import InProcessEngine
from distrepro.hardware.profiles import load_profile
from distrepro.hardware.workloads import get_workload
from distrepro.job.resolve import build_job
from distrepro.report.build import write_report
from distrepro.sensitivity.analytic import simulate
from distrepro.sensitivity.probe import NotAnalysable, Prober
from distrepro.sensitivity.retime import reseed
from distrepro.sensitivity.runner import sensitivity
from distrepro.sensitivity.space import apply_to_profile, latin_hypercube


@pytest.fixture(scope="module")
def profiles(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    folder = tmp_path_factory.mktemp("sens_profiles")
    out = {}
    for data in (TINY_PROFILE, FLIP_PROFILE):
        path = folder / f"{data['name']}.yaml"
        path.write_text(yaml.safe_dump(data, sort_keys=False))
        out[data["name"]] = str(path)
    return out


ARMS = {
    "ar_sgd": ("ar_sgd", {"weighting": "equal", "overlap": False}),
    "ar_sgd_samples": ("ar_sgd", {"weighting": "samples", "overlap": False}),
    "cadp": ("cadp", {"micro_batch": [16, 16, 2], "round_epochs": 1, "warmup_steps": 2}),
    "cadp_ps_rounds": ("cadp", {"micro_batch": [8, 8, 2], "round_epochs": 0.5, "co_adaptive": True}),
    "chao_adaptive": ("chao_alloc", {"mode": "adaptive", "global_batch": 34, "overlap": False}),
    "deepspeed_zero": ("deepspeed_zero", {}),
}


@pytest.mark.parametrize(
    "arm", [pytest.param(a, marks=pytest.mark.smoke) if a in ("ar_sgd", "cadp") else a for a in ARMS]
)
def test_analytical_time_equals_the_engines_at_central_values(arm: str, profiles: dict[str, str]) -> None:
    method, params = ARMS[arm]
    job = build_job(validate_config(_config(profiles["tiny-sens"], method, params)), 1)
    result = InProcessEngine().run(job)
    timing = simulate(job, Prober(job))
    assert timing.emulated_s == pytest.approx(result.emulated_s, rel=1e-12)
    assert timing.samples == result.final.samples and timing.steps == result.final.step
    for rec in result.evals:  # every evaluation's emulated time, not only the last
        assert timing.at_step(rec.step) == pytest.approx(rec.emulated_s, rel=1e-12)
        assert timing.at_samples(rec.samples) == timing.at_step(rec.step)  # time to target reads samples


def test_reseed_gives_the_noise_of_the_other_seed(profiles: dict[str, str]) -> None:
    cfg = validate_config(_config(profiles["tiny-sens"], "ar_sgd", {"overlap": False}))
    built, derived = build_job(cfg, 2), reseed(build_job(cfg, 0), 2)
    assert derived.seed_parts == built.seed_parts
    assert simulate(derived, Prober(derived)).emulated_s == simulate(built, Prober(built)).emulated_s


def test_asynchronous_methods_are_not_analysable(profiles: dict[str, str]) -> None:
    job = build_job(validate_config(_config(profiles["tiny-sens"], "gossip", {})), 0)
    with pytest.raises(NotAnalysable, match="asynchronous"):
        Prober(job)


def test_latin_hypercube_is_deterministic_and_stratified() -> None:
    a, b = latin_hypercube(50, 4, seed=7), latin_hypercube(50, 4, seed=7)
    assert np.array_equal(a, b) and not np.array_equal(a, latin_hypercube(50, 4, seed=8))
    assert a.shape == (50, 4) and ((a >= 0) & (a < 1)).all()
    for j in range(4):  # exactly one point in each of the 50 strata of every variable
        assert sorted(np.floor(a[:, j] * 50).astype(int)) == list(range(50))


def test_a_setting_moves_the_ranged_figures_only(profiles: dict[str, str]) -> None:
    prof = load_profile(profiles["tiny-sens"])
    new = apply_to_profile(prof, {"cpu.speed": 2.0, "cpu.nic.bandwidth_gbytes_per_s": 0.5, "gpu.speed": 1.0})
    cpu = new.device(2)
    assert cpu.throughput_samples_per_s[WORKLOAD] == 40.0 and cpu.nic.bandwidth_gbytes_per_s == 0.5
    assert new.device(0).throughput_samples_per_s[WORKLOAD] == 400.0
    assert new.network.server.bandwidth_gbytes_per_s == 1.0  # not named: unchanged
    assert new.link(0, 2).bandwidth_bytes_per_s == 0.5e9


def test_the_framework_figures_are_sweep_variables_and_a_setting_moves_them() -> None:
    """DDP's launch cost and bucket copies on a GPU cluster, NCCL's contention with backward: variables over
    timing.framework.RANGES at the charged central values; pinned off (acid) or on gloo (a mixed cluster): no
    contention variable."""
    from distrepro.sensitivity.space import profile_variables
    from distrepro.timing import framework

    a100 = load_profile("a100-ib-8")
    found = profile_variables([a100])
    contention = found["framework.contention"]
    assert (contention.low, contention.high, contention.central) == (0.0, 0.4, framework.CONTENTION)
    assert found["framework.launch_us"].central == 5.0 and found["framework.bucket_passes"].central == 4.0
    assert "framework.contention" not in profile_variables([load_profile("acid-a100-16")])
    assert "framework.contention" not in profile_variables([load_profile("cadp-ijcai25")])
    moved = apply_to_profile(a100, {"framework.contention": 0.25, "framework.launch_us": 8.0})
    figures = framework.costs(moved)
    assert (figures.contention, figures.launch_s, figures.bucket_passes) == (0.25, 8e-6, 4.0)
    assert framework.costs(apply_to_profile(a100, {})).contention == framework.CONTENTION  # not named: unchanged


# ---------------------------------------------------------------- a hand-computed flip point


@pytest.mark.smoke
def test_the_sweep_finds_a_hand_computed_flip_point(profiles: dict[str, str]) -> None:
    # small: 32 steps of (8/v + P/B); big: 8 steps of (32/v + P/B) (ring all-reduce of P bytes on 2 ranks,
    # no latency). Speedup (256/v + 32P/B) / (256/v + 8P/B) >= 2  <=>  B <= P·v/16.
    info, rs, jobs = _flip_setup(profiles["flip-sens"])
    flip_gb = get_workload(WORKLOAD).param_bytes * SPEED / 16 / 1e9
    result = sensitivity(info, rs, job_for=lambda run_id, seed: jobs[run_id])
    assert result is not None and [c.claim_id for c in result.claims] == ["F1"]  # accuracy is not a timing claim
    (claim,) = result.claims
    assert result.max_validation_error() < 1e-12
    (flip,) = claim.flips
    assert flip.variable == "network.inter_node.bandwidth_gbytes_per_s"
    assert (flip.below, flip.above) == ("PASS", "FAIL")
    assert flip.value == pytest.approx(flip_gb, rel=1e-3)
    quantile = math.log(flip_gb / 0.01) / math.log(10.0 / 0.01)  # log spacing over [0.01, 10]
    assert abs(claim.share("PASS") - quantile) <= 1 / result.samples + 1e-9
    assert claim.decisive() == flip.variable and claim.tornado[0].low.verdict == "PASS"


def test_the_report_renders_the_sensitivity_section(profiles: dict[str, str], tmp_path: Path) -> None:
    info, rs, jobs = _flip_setup(profiles["flip-sens"])
    result = sensitivity(info, rs, samples=16, job_for=lambda run_id, seed: jobs[run_id])
    report = write_report(info, rs, tmp_path / "flip", root=tmp_path, sensitivity=result)
    md = report.markdown.read_text()
    assert "## Sensitivity of the timing verdicts" in md and md.index("## Sensitivity") < md.index("## Runs")
    assert "| F1: batch 32 trains" in md and "network.inter_node.bandwidth_gbytes_per_s" in md
    assert "PASS → FAIL as network.inter_node.bandwidth_gbytes_per_s rises past" in md
    for name in ("sensitivity_share.png", "sensitivity_tornado.png", "sensitivity_heatmap.png"):
        if name != "sensitivity_heatmap.png":  # one variable: no heat map
            assert (tmp_path / "flip" / "figures" / name).stat().st_size > 5000
            assert f"figures/{name}" in md
    assert not (tmp_path / "flip" / "figures" / "sensitivity_heatmap.png").exists()
    assert "Central verdicts differ" not in md  # the sweep at central values agrees with the report
    # a verdict that flips over the plausible hardware depends on that figure and leaves the PASS/FAIL tally
    f1 = next(v for v in report.verdicts if v.claim_id == "F1")
    share = next(c for c in result.claims if c.claim_id == "F1").share("PASS")
    assert 0.05 < share < 0.95 and f1.pass_share == share
    assert f1.depends_on == "network.inter_node.bandwidth_gbytes_per_s"
    assert "1 depends on an assumption" in md and "depends on network.inter_node.bandwidth_gbytes_per_s" in md
    html = report.html.read_text()
    assert html.count('<img src="data:image/png;base64,') >= 2
    frame = pd.read_csv(tmp_path / "flip" / "sensitivity_samples.csv")
    assert len(frame) == 16 and {"F1:statistic", "F1:verdict"} <= set(frame.columns)


def test_an_assumption_must_name_a_known_arm(profiles: dict[str, str]) -> None:
    _, rs, jobs = _flip_setup(profiles["flip-sens"])
    bad = {**FLIP_PAPER, "setup": {**FLIP_PAPER["setup"], "sensitivity": {"assumptions": [
        {"arm": "nope", "param": "lr", "low": 0.01, "high": 0.1, "reason": "test"}]}}}  # fmt: skip
    with pytest.raises(Exception, match=r"setup.sensitivity.assumptions\[0\].arm.*unknown arm 'nope'"):
        sensitivity(PaperInfo("flip", validate_paper(bad)), rs, job_for=lambda run_id, seed: jobs[run_id])


def test_an_assumption_range_must_contain_the_configured_value(profiles: dict[str, str]) -> None:
    _, rs, jobs = _flip_setup(profiles["flip-sens"])
    bad = {**FLIP_PAPER, "setup": {**FLIP_PAPER["setup"], "sensitivity": {"assumptions": [
        {"arm": "big", "param": "lr", "low": 0.5, "high": 0.9, "reason": "test"}]}}}  # fmt: skip
    with pytest.raises(Exception, match=r"big.lr = 0.05 .* not a number inside \[0.5, 0.9\]"):
        sensitivity(PaperInfo("flip", validate_paper(bad)), rs, job_for=lambda run_id, seed: jobs[run_id])


# ---------------------------------------------------------------- learning how an iteration scales


def test_patterns_are_inferred_from_two_probes_and_only_trusted_where_seen() -> None:
    from distrepro.sensitivity.pattern import infer
    from distrepro.sensitivity.probe import Call

    sync = ("comm", Call("all_reduce", (0, 1), 400.0))
    whole = infer((5, [("compute", 5), sync]), (9, [("compute", 9), sync]))
    assert whole is not None and whole.micro is None and whole.events(7) == [("compute", 7), sync]
    assert whole.covers(9) and not whole.covers(10)  # micro-batches of 64 would look the same up to 64
    micro = infer((130, [("compute", 64), ("compute", 64), ("compute", 2), sync]), (20, [("compute", 20), sync]))
    assert micro is not None and micro.micro == 64 and micro.covers(10_000)
    assert micro.events(200) == [("compute", 64)] * 3 + [("compute", 8), sync]
    other = ("comm", Call("all_reduce", (0, 1), 800.0))
    assert infer((5, [("compute", 5), sync]), (9, [("compute", 9), other])) is None  # bytes depend on n
    assert infer((5, [("compute", 5), sync, ("compute", 5)]), (9, [("compute", 9), sync, ("compute", 9)])) is None


def test_learnt_patterns_give_the_times_of_probing_every_size(profiles: dict[str, str]) -> None:
    method, params = ARMS["cadp"]
    job = build_job(validate_config(_config(profiles["tiny-sens"], method, params)), 0)
    learning, probing = Prober(job), Prober(job, learn=False)
    prof = load_profile(profiles["tiny-sens"])
    for i, (gpu, cpu, rounds) in enumerate([(0.5, 2.0, 1.0), (2.0, 0.5, 0.5), (1.3, 0.7, 1.0), (0.8, 1.9, 0.25)] * 3):
        p = apply_to_profile(prof, {"gpu.speed": gpu, "cpu.speed": cpu * (1 + i / 100)})
        params = job.params.model_copy(update={"round_epochs": rounds})
        from dataclasses import replace

        from distrepro.timing.timemodel import CommCostModel, ComputeModel

        c = job.compute
        j = replace(job, profile=p, params=params, cost=CommCostModel(p),
                    compute=ComputeModel(p, c.workload_name, c.flops_per_sample, c.seed_parts))  # fmt: skip
        assert simulate(j, learning).emulated_s == simulate(j, probing).emulated_s
    assert learning.predicted > 0


def test_a_run_the_replay_cannot_time_leaves_its_claims_unswept(
    profiles: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Decent-DP's overlapped AER rounds (non-blocking collectives of two groups at once) are not replayed: the sweep
    lists the claims on such a run as not swept, with the reason, instead of stopping with an error."""
    from distrepro.job.resolve import Job
    from distrepro.sensitivity import retime
    from distrepro.sensitivity.analytic import Timing

    real = retime.simulate

    def simulate(job: Job, prober: Prober) -> Timing:
        if job.config.batch_size == 32:
            raise NotAnalysable("non-blocking collectives of two groups overlap in time (shared links)")
        return real(job, prober)

    monkeypatch.setattr(retime, "simulate", simulate)
    info, rs, jobs = _flip_setup(profiles["flip-sens"])
    result = sensitivity(info, rs, samples=8, job_for=lambda run_id, seed: jobs[run_id])
    assert result is not None and result.claims == [] and result.space.variables == []
    assert result.skipped["F1"] == (
        "run big-0 (big) cannot be re-timed analytically: non-blocking collectives of two groups overlap in time "
        "(shared links)"
    )

"""The Decent-DP authors' batches as their sampler cuts them, and a step restarted at each host sync
(``benchmarks/authors_batches.py``, ``benchmarks/eager_step.py``): the rules on corpora small enough to check by
hand, the recurrence on op lists whose answer is known."""

from __future__ import annotations

from types import ModuleType

import numpy as np
import pytest
import yaml
from benchmark_module import benchmark_module


@pytest.fixture(scope="module")
def batches() -> ModuleType:
    return benchmark_module("authors_batches")


def test_a_batch_closes_when_both_sides_would_pass_twice_the_budget(batches: ModuleType) -> None:
    src, tgt = np.array([3, 5, 3, 5]), np.array([1, 5, 3, 3])  # sums 4, 10, 6, 8: cut longest first
    rows = batches.authors_batches(src, tgt, max_tokens=9, drop_last=False)
    # (5,5) + (5,3) = 18 tokens, within 2 x 9; (3,3) would make 24: a new batch, which (3,1) joins (10 tokens)
    assert rows.tolist() == [[10, 8, 10, 10, 2], [6, 4, 6, 6, 2]]
    # the sampler drops the last, unfinished batch by default
    assert batches.authors_batches(src, tgt, max_tokens=9).tolist() == [[10, 8, 10, 10, 2]]


def test_a_side_filled_below_the_threshold_opens_a_batch(batches: ModuleType) -> None:
    src, tgt = np.array([40, 2, 2]), np.array([40, 30, 2])  # sums 80, 32, 4
    # (2, 30) after (40, 40): source fill 42 / (40 x 2) = 0.53, target 70 / 80: both above 0.35, so it joins;
    # (2, 2) then: source 44 / (40 x 3) = 0.37, target 72 / (40 x 3) = 0.6: joins too
    assert batches.authors_batches(src, tgt, max_tokens=1000, drop_last=False)[:, 4].tolist() == [3]
    # at a threshold of 0.6 the second pair's source fill (0.53) is too thin; then (2, 2) after (2, 30): target
    # fill 32 / (30 x 2) = 0.53, too thin again
    thin = batches.authors_batches(src, tgt, max_tokens=1000, efficiency=0.6, drop_last=False)
    assert thin[:, 4].tolist() == [1, 1, 1]


def test_pairs_of_one_sum_keep_the_corpus_order(batches: ModuleType) -> None:
    # four pairs of sum 6 in corpus order (1,5), (5,1), (3,3), (3,3): a stable sort keeps them so; the budget
    # takes two a batch, and padding is each side's longest times the count
    src, tgt = np.array([1, 5, 3, 3]), np.array([5, 1, 3, 3])
    rows = batches.authors_batches(src, tgt, max_tokens=6, drop_last=False)
    assert rows.tolist() == [[6, 6, 10, 10, 2], [6, 6, 6, 6, 2]]


def test_the_slowest_of_p_is_the_order_statistic(batches: ModuleType) -> None:
    work = np.array([1.0, 3.0])
    assert batches.expected_slowest(work, 1) == 1.0
    # the largest of two draws is 3 unless both are 1 (probability 1/4): 2.5, over a mean of 2
    assert batches.expected_slowest(work, 2) == pytest.approx(2.5 / 2.0)


def test_padding_grows_with_the_sentences_a_batch_holds(batches: ModuleType) -> None:
    table = batches.padding_table((1, 64), pairs=60_000, seed=1)
    # each side padded to its longest: more sentences a batch, a longer longest; never below the budget
    assert table[1]["sentences"] > 20 * table[64]["sentences"]
    assert table[1]["padding_factor"] > table[64]["padding_factor"] > 1.05
    assert table[64]["padded_work_cv"] > table[1]["padded_work_cv"] and table[64]["slowest_of_p"] > 1.0


def test_the_corpus_is_the_validations_wmt14_figures(batches: ModuleType) -> None:
    figures = batches.corpus_figures()
    assert figures["mean_length"] == 29.5 and figures["ratio_cap"] == 1.5
    src, tgt = batches.sample_corpus(20_000, seed=2, figures=figures)
    # the authors add a start token to fairseq's end-token count and cut at 156 words
    assert 29.5 < src.mean() < 33.5 and src.max() <= batches.TRUNCATE + 2 and tgt.min() >= 2


def test_a_synced_step_restarts_the_pipeline() -> None:
    eager = benchmark_module("eager_step")
    gpu = [1.0, 1.0, 1.0, 1.0]
    # GPU-bound (host 0.1 an op): the first issue, then the GPU back to back
    assert eager.synced_step_s(gpu, 0.1, syncs=1) == pytest.approx(4.1)
    # a sync after the second op: the host waits for the GPU (2.1), issues the third at 2.2
    assert eager.synced_step_s(gpu, 0.1, syncs=2) == pytest.approx(4.2)
    # host-bound (2.0 an op): the last issue, then one op
    assert eager.synced_step_s(gpu, 2.0, syncs=1) == pytest.approx(9.0)
    # host and GPU alternate (ops 0.5 and 3.0 on the GPU, 1.0 to issue): more than the larger of the two sums
    mixed = [0.5, 3.0, 0.5, 3.0]
    free_running = max(sum(mixed), 4 * 1.0)
    synced = eager.synced_step_s(mixed, 1.0, syncs=1)
    assert synced == pytest.approx(8.5) and synced > free_running
    # syncs fall among the ops after the forward's: with the forward at 3 of 4 ops, one sync cuts nothing new
    assert eager.synced_step_s(gpu, 0.1, syncs=2, forward=3) == pytest.approx(4.1)


def test_a_power_capped_gpu_runs_its_matrix_products_at_its_sustained_rate() -> None:
    """The T4's tensor rate is the 24 TFLOPS its 70 W cap sustains, below the generic half of its 65 TFLOPS peak;
    a GPU without such a measurement keeps the generic fraction; memory-bound ops are unchanged."""
    eager = benchmark_module("eager_step")
    assert eager.achieved_rates("t4") == (24e12, 0.8 * 320e9)
    assert eager.achieved_rates("a100") == (0.5 * 312e12, 0.8 * 1555e9)
    flop_rate, byte_rate = eager.achieved_rates("t4")
    assert eager.kernel_s(1e6, 1e9, flop_rate, byte_rate) == pytest.approx(1e9 / 24e12)  # a GEMM: the cap
    assert eager.kernel_s(1e8, 1e6, flop_rate, byte_rate) == pytest.approx(1e8 / 256e9)  # a copy: bandwidth


#: the datasheet roofline's peak (samples/s) per Fig. 6 cluster, as ``eager_step.py --roofline`` prints it: the T4's
#: matrix products at the 24 TFLOPS its power cap sustains
ROOFLINE_PEAKS = {"t4-ib": 118.1, "a40-25gbe": 288.6, "a100-ib": 631.7}


@pytest.mark.slow
def test_the_profiles_peaks_are_the_rooflines_own() -> None:
    """The figures the profile check below reads are what the roofline computes now (about 20 s of CPU), so a
    change of its constants cannot leave the profiles and this file behind."""
    figures = benchmark_module("eager_step").roofline()["gpus"]
    gpu_of = {"t4-ib": "t4", "a40-25gbe": "a40", "a100-ib": "a100"}
    assert {setup: figures[gpu]["peak_samples_per_s"] for setup, gpu in gpu_of.items()} == ROOFLINE_PEAKS


def test_the_decentdp_profiles_charge_the_padded_batch(batches: ModuleType) -> None:
    """Each Fig. 6 profile's Transformer-base peak is the datasheet roofline's (:data:`ROOFLINE_PEAKS`) divided by
    the padded tokens per budgeted one at its GPU count."""
    roofline = ROOFLINE_PEAKS
    table = batches.padding_table((8, 16, 32, 64))
    seen = 0
    for path in sorted((batches.REPO / "hardware_profiles").glob("*.yaml")):
        setup, _, rest = path.stem.rpartition("-")
        if setup not in roofline and path.stem != "a40-25gbe-16-jitter":
            continue
        setup, gpus = ("a40-25gbe", 16) if path.stem == "a40-25gbe-16-jitter" else (setup, int(rest))
        device = yaml.safe_load(path.read_text(encoding="utf-8"))["nodes"][0]["devices"][0]
        charged = device["throughput_samples_per_s"]["transformer_base_wmt14_195tok"]
        assert charged == round(roofline[setup] / table[gpus]["padded_per_budget"], 1), path.name
        seen += 1
    assert seen == 10


def _profile_groups(batches: ModuleType, name: str) -> list[tuple[str, dict]]:
    """The first device group of Fig. 6 profile ``name`` and, for A40/16, of its straggler variant (which shares
    its figures), each with the file's stem."""
    stems = (name, f"{name}-jitter") if name == "a40-25gbe-16" else (name,)
    folder = batches.REPO / "hardware_profiles"
    return [
        (stem, yaml.safe_load((folder / f"{stem}.yaml").read_text(encoding="utf-8"))["nodes"][0]["devices"][0])
        for stem in stems
    ]


def test_the_decentdp_profiles_charge_their_batches_spread(batches: ModuleType) -> None:
    """Each Fig. 6 profile's ``step_jitter_sigma`` is the script's: the lognormal whose expected slowest of p is
    the padded batches' (zero where the host floor hides the spread); the straggler variant keeps its own jitter."""
    table = batches.profile_jitter(pairs=400_000)
    for name, row in table.items():
        for stem, group in _profile_groups(batches, name):
            assert group["step_jitter_sigma"] == {batches.WORKLOAD: row["sigma"]}, stem
    assert len(table) == 9 and table["a100-ib-32"]["sigma"] == 0.0  # the floor (24.7 ms) over 8.7 + 7.0 ms
    assert 0.01 < table["t4-ib-64"]["sigma"] < table["t4-ib-64"]["step_cv"]  # the lognormal's longer tail


def test_the_lognormal_matches_the_slowest_of_p_not_the_cv(batches: ModuleType) -> None:
    from distrepro.timing.framework import expected_max_factor

    work = np.array([1.0, 1.0, 1.0, 1.3])  # a bounded spread: one batch in four is 30 % heavier
    row = batches.step_jitter(work, gpu_ms=10.0, fixed_ms=0.0, floor_ms=0.0, p=8)
    cv = float(np.sqrt(np.expm1(row["sigma"] ** 2)))
    assert expected_max_factor(8, cv) == pytest.approx(row["slowest_of_p"], abs=3e-4)  # both rounded to 4 places
    assert row["slowest_of_p"] == pytest.approx(1.3 * (1 - 0.75**8) / 1.075 + (0.75**8) / 1.075, abs=1e-4)
    # a floor above every step hides the spread
    assert batches.step_jitter(work, 10.0, 0.0, 20.0, 8)["sigma"] == 0.0


@pytest.mark.slow
def test_the_decentdp_profiles_charge_their_loops_syncs(batches: ModuleType) -> None:
    """Each Fig. 6 profile's ``host_sync_ms`` is the script's: its padded step restarted at the loop's syncs, less
    the free-running step (about 40 s of CPU). Decent-DP's per-bucket syncs cost at least the per-step ones."""
    table = batches.profile_syncs(batches.fig6_compute(batches.padding_table((8, 16, 32, 64))))
    for name, row in table.items():
        for stem, group in _profile_groups(batches, name):
            assert group["host_sync_ms"] == {batches.WORKLOAD: row}, stem
        assert 0 < row["per_step"] <= row["per_bucket"], name
    assert len(table) == 9

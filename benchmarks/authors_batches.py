"""The Decent-DP authors' token batches and their loop's host syncs: what each adds to Fig. 6's compute.

Why: the compute model (``max(t_floor, t_fixed + b / peak)``, :mod:`distrepro.timing.compute`; its figures from
``benchmarks/eager_step.py --roofline``) prices a batch of exactly ``25,000 / p`` tokens whose host runs ahead of
its GPU. The authors' loop does neither, and both follow from their code, not from a measured step time:

* **Padding** (WangZesen/Decentralized-Training-Exp @ 6817039, ``transformer/src/data/sampler.py``
  ``DistributedTokenBatchSampler._create_batches``, restated in :func:`authors_batches`): the sentence pairs are
  sorted by source + target length, longest first (a stable sort: pairs of equal sum keep the corpus order), and a
  batch closes when its source + target tokens would pass twice ``max_tokens_per_local_batch`` (``25,000 / p``,
  ``src/conf.py``) or either side's fill (tokens / (count x longest)) would drop below ``batch_efficiency`` 0.35.
  ``data/dataloader.py`` pads each side to its longest sentence (``pad_sequence``), and every op of the step runs
  on the padded tensors. Pairs of one sum differ in how it splits between the sides, so each side's longest is
  longer than its mean: the GPU computes more tokens than the budget counts.
* **Host syncs** (``src/decent_train.py`` and ``src/allreduce_train.py``: ``loss.detach().item()`` every step; the
  GradScaler's ``step`` reads ``found_inf`` back, once a step for All-Reduce and once per bucket inside the backward
  for Decent-DP, whose hooks step each bucket's optimizer: ``decent_dp/ddp.py`` ``_ddp_fn``). After a sync the GPU
  idles until the host issues the next op, so a step is the in-order pipeline of host issue and GPU execution
  restarted at each sync (:func:`eager_step.synced_step_s`), not ``max(host, GPU)``.

The corpus: WMT14 en-de's length statistics as the validation's ``dle-transformer`` ``batch_spread`` states them
(``benchmarks/data/emulator_points.yaml``: gamma source lengths of mean 29.5 tokens and CV 0.6, targets from Gale &
Church's length model, both within a ratio of 1.5), plus the authors' start token and their 156-token truncation
(``src/preprocess.py``); a seeded sample of 400,000 pairs. Prints, per GPU count, the padded over the budgeted
tokens, the spread of a batch's padded work (a synchronous step waits for the slowest of p), and with
``--steps`` the Fig. 6 compute per GPU: unpadded, padded (as charged since round 11), and padded with the syncs,
and each Fig. 6 profile's ``host_sync_ms`` (what the syncs add to the free-running step, charged since round 13,
:func:`profile_syncs`); with ``--jitter`` each Fig. 6 profile's ``step_jitter_sigma`` (charged since round 12,
:func:`step_jitter`).

    python benchmarks/authors_batches.py            # padding per GPU count (seconds)
    python benchmarks/authors_batches.py --jitter   # and each Fig. 6 profile's batch spread (seconds)
    python benchmarks/authors_batches.py --steps    # and the Fig. 6 compute per GPU, each profile's syncs (1 min)
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import eager_step
import numpy as np
import yaml

from distrepro.timing.framework import expected_max_factor

REPO = Path(__file__).resolve().parents[1]
POINTS = REPO / "benchmarks" / "data" / "emulator_points.yaml"
#: Fig. 6's global batch and GPU counts per cluster (Wang et al., ICLR 2025, Fig. 6)
GLOBAL_TOKENS = 25_000
CELLS = {"t4": (16, 32, 64), "a100": (8, 16, 32), "a40": (8, 16, 32)}
#: the Fig. 6 profiles of each GPU, and the workload and global batch (samples of 25,000 / 128 tokens) they charge
PROFILES = {"t4-ib": "t4", "a100-ib": "a100", "a40-25gbe": "a40"}
WORKLOAD, GLOBAL_SAMPLES = "transformer_base_wmt14_195tok", 128
#: the authors' data config (``src/conf.py``): fill threshold, truncation (+ start and end tokens)
BATCH_EFFICIENCY, TRUNCATE = 0.35, 156
#: Decent-DP's buckets for Transformer-base (the engine's 7 bucket all-reduces, docs/emulator.md)
DECENT_BUCKETS = 7
#: the profiles' host floor [L]: 21.6 ms of CPU for 1,781 kernel ops (eager_step.py; the t4-ib-16 profile)
HOST_S_PER_OP = 21.6e-3 / 1781


def corpus_figures() -> dict[str, float]:
    """WMT14 en-de's length figures, read where the validation keeps them (one copy of each number)."""
    points = yaml.safe_load(POINTS.read_text(encoding="utf-8"))
    spread = points["sources"]["dle-transformer"]["batch_spread"]
    keys = ("mean_length", "length_cv", "length_ratio", "ratio_variance", "chars_per_token", "ratio_cap", "max_length")
    return {k: float(spread[k]) for k in keys}


def sample_corpus(pairs: int, seed: int = 0, figures: dict[str, float] | None = None) -> tuple[np.ndarray, ...]:
    """(source, target) token lengths of ``pairs`` sentence pairs, the authors' start and end tokens included."""
    f = figures or corpus_figures()
    rng = np.random.default_rng(seed)
    shape = 1.0 / f["length_cv"] ** 2
    src = np.clip(np.rint(rng.gamma(shape, f["mean_length"] / shape, pairs)), 1, f["max_length"]).astype(np.int64)
    sd = np.sqrt(f["ratio_variance"] * src / f["chars_per_token"])
    tgt = np.rint(rng.normal(f["length_ratio"] * src, sd)).astype(np.int64)
    kept = (tgt >= np.ceil(src / f["ratio_cap"])) & (tgt <= np.floor(src * f["ratio_cap"])) & (tgt >= 1)
    src, tgt = src[kept], tgt[kept]
    # fairseq's lengths count the end token; the authors add a start token and cut the words at 156
    return np.minimum(src, TRUNCATE + 1) + 1, np.minimum(tgt, TRUNCATE + 1) + 1


def authors_batches(
    src: np.ndarray, tgt: np.ndarray, max_tokens: int, efficiency: float = BATCH_EFFICIENCY, drop_last: bool = True
) -> np.ndarray:
    """The batches ``_create_batches`` cuts, one row each: (source tokens, target tokens, padded source, padded
    target, sentences). Longest pairs first, ties in corpus order; a pair that would break a rule opens a batch;
    the last, unfinished batch is dropped as the sampler's default ``drop_last=True`` drops it."""
    order = np.argsort(-(src + tgt), kind="stable")
    rows: list[tuple[int, int, int, int, int]] = []
    s_sum = t_sum = s_max = t_max = count = 0
    for s, t in zip(src[order].tolist(), tgt[order].tolist(), strict=True):
        n_s, n_t, m_s, m_t = s_sum + s, t_sum + t, max(s_max, s), max(t_max, t)
        over = n_s + n_t > 2 * max_tokens
        thin = n_s / (m_s * (count + 1)) < efficiency or n_t / (m_t * (count + 1)) < efficiency
        if count and (over or thin):
            rows.append((s_sum, t_sum, s_max * count, t_max * count, count))
            n_s, n_t, m_s, m_t, count = s, t, s, t, 0
        s_sum, t_sum, s_max, t_max, count = n_s, n_t, m_s, m_t, count + 1
    if count and not drop_last:
        rows.append((s_sum, t_sum, s_max * count, t_max * count, count))
    return np.array(rows, dtype=np.float64).reshape(-1, 5)


def expected_slowest(work: np.ndarray, p: int) -> float:
    """E[largest of p independent draws of a batch's work] / E[work] (the discrete order statistic)."""
    if p <= 1:
        return 1.0
    values = np.sort(work)
    cdf = np.arange(1, len(values) + 1) / len(values)
    below = np.concatenate(([0.0], cdf[:-1]))
    return float(np.sum(values * (cdf**p - below**p)) / values.mean())


def padding_table(gpus: tuple[int, ...], pairs: int = 400_000, seed: int = 0) -> dict[int, dict[str, float]]:
    """Per GPU count: the batch's sentences, budgeted tokens a side, padded over budgeted tokens (both sides),
    the padded work's coefficient of variation and a synchronous step's slowest-of-p factor on it."""
    src, tgt = sample_corpus(pairs, seed)
    out: dict[int, dict[str, float]] = {}
    for p in gpus:
        rows = authors_batches(src, tgt, GLOBAL_TOKENS // p)
        padded = rows[:, 2] + rows[:, 3]
        out[p] = {
            "sentences": round(float(rows[:, 4].mean()), 1),
            "tokens_per_side": round(float((rows[:, 0] + rows[:, 1]).mean() / 2), 1),
            "padding_factor": round(float(padded.sum() / (rows[:, 0] + rows[:, 1]).sum()), 4),
            # what the compute model charges per budgeted token: batches close below the budget, then pad
            "padded_per_budget": round(float(padded.mean() / 2 / (GLOBAL_TOKENS / p)), 4),
            "padded_work_cv": round(float(padded.std() / padded.mean()), 4),
            "slowest_of_p": round(expected_slowest(padded, p), 4),
        }
    return out


def step_jitter(work: np.ndarray, gpu_ms: float, fixed_ms: float, floor_ms: float, p: int) -> dict[str, float]:
    """The step-time spread a profile charges for the batches' padded work. Each rank's step is
    ``max(floor, fixed + gpu x W / E[W])``, ``W`` one batch's padded tokens (drawn anew each step and rank: the
    sampler's batches are shuffled and dealt out), ``gpu`` the per-token part at the mean batch; where the host
    floor binds, the GPU's spread hides under it. The engine multiplies a step by a mean-1 lognormal factor, whose
    tail is longer than this bounded spread's: at the step's own CV it would overcharge the slowest of p (T4 at 64:
    x1.068 for x1.045), which is what a synchronous step pays. So sigma is chosen for the lognormal's expected
    slowest of p to be this one's (:func:`distrepro.timing.framework.expected_max_factor`, by bisection); a group
    of fewer ranks (the AER's 8 or 2 x 4) then pays within 0.7 % of its own order statistic."""
    steps = np.maximum(floor_ms, fixed_ms + gpu_ms * work / work.mean())
    slowest = expected_slowest(steps, p)
    low, high = 0.0, 0.5
    for _ in range(60):
        mid = (low + high) / 2
        low, high = (mid, high) if expected_max_factor(p, mid) < slowest else (low, mid)
    cv = (low + high) / 2 if slowest > 1.0 else 0.0
    return {
        "step_cv": round(float(steps.std() / steps.mean()), 4),
        "slowest_of_p": round(slowest, 4),
        "sigma": round(float(np.sqrt(np.log1p(cv * cv))), 4),
    }


def profile_jitter(pairs: int = 400_000, seed: int = 0) -> dict[str, dict[str, float]]:
    """Per Fig. 6 profile (``hardware_profiles/<setup>-<p>.yaml``): its three Transformer-base figures, the
    step-time spread of its batches' padded work (:func:`step_jitter`) and the lognormal sigma it declares."""
    src, tgt = sample_corpus(pairs, seed)
    out: dict[str, dict[str, float]] = {}
    for setup, gpu in PROFILES.items():
        for p in CELLS[gpu]:
            device = yaml.safe_load((REPO / "hardware_profiles" / f"{setup}-{p}.yaml").read_text(encoding="utf-8"))
            figures = device["nodes"][0]["devices"][0]
            peak = figures["throughput_samples_per_s"][WORKLOAD]
            fixed, floor = figures["step_overhead_ms"][WORKLOAD], figures["step_floor_ms"][WORKLOAD]
            gpu_ms = GLOBAL_SAMPLES / p / peak * 1e3
            rows = authors_batches(src, tgt, GLOBAL_TOKENS // p)
            out[f"{setup}-{p}"] = {"gpu_ms": round(gpu_ms, 2), "fixed_ms": fixed, "floor_ms": floor,
                                   **step_jitter(rows[:, 2] + rows[:, 3], gpu_ms, fixed, floor, p)}  # fmt: skip
    return out


def fig6_compute(padding: dict[int, dict[str, float]]) -> dict[str, dict[int, dict[str, float]]]:
    """Per cluster and GPU count, one GPU's compute in ms: unpadded (round 10's profiles: ``max(floor + optimizer,
    t_fixed + b x per token)``), padded (as the profiles charge it since round 11); then the padded step's own ops
    (each at the roofline, ``HOST_S_PER_OP`` to issue), with a host free to run ahead (``max`` of the two sums) and
    restarted at the loop's syncs (All-Reduce: after the backward; Decent-DP: after each bucket's update too). The
    optimizer's passes are added to each."""
    rf = eager_step.roofline()
    out: dict[str, dict[int, dict[str, float]]] = {}
    cache: dict[int, tuple[list[tuple[str, int, int]], int]] = {}
    for gpu, counts in CELLS.items():
        flop_rate, byte_rate = eager_step.achieved_rates(gpu)
        fig = rf["gpus"][gpu]
        floor = HOST_S_PER_OP * 1781 * 1e3 + fig["optimizer_ms"]
        out[gpu] = {}
        for p in counts:
            tokens = GLOBAL_TOKENS / p
            padded = padding[p]["tokens_per_side"] * padding[p]["padding_factor"]
            unpadded = max(floor, fig["t_fixed_ms"] + tokens * fig["per_token_us"] / 1e3)
            with_padding = max(floor, fig["t_fixed_ms"] + padded * fig["per_token_us"] / 1e3)
            n = round(padded)
            if n not in cache:
                cache[n] = eager_step.step_ops(n)
            ops, forward = cache[n]
            gpu_s = [eager_step.K0_S + eager_step.kernel_s(b, f, flop_rate, byte_rate) for _, b, f in ops]
            optimizer_s = fig["optimizer_ms"] / 1e3
            free = max(sum(gpu_s), len(gpu_s) * HOST_S_PER_OP) + optimizer_s
            row = {"unpadded_ms": round(unpadded, 1), "padded_ms": round(with_padding, 1)}
            row["padded_ops_free_running_ms"] = round(free * 1e3, 1)
            for loop, syncs, charge in (("allreduce", 1, "per_step"), ("decent", DECENT_BUCKETS, "per_bucket")):
                step = eager_step.synced_step_s(gpu_s, HOST_S_PER_OP, syncs, forward) + optimizer_s
                row[f"padded_synced_{loop}_ms"] = round(step * 1e3, 1)
                # what the profile charges on top of max(host, GPU): the syncs' drain and refill
                row[f"sync_{charge}_ms"] = round(max(0.0, step - free) * 1e3, 2)
            out[gpu][p] = row
    return out


def profile_syncs(compute: dict[str, dict[int, dict[str, float]]]) -> dict[str, dict[str, float]]:
    """Per Fig. 6 profile, the ``host_sync_ms`` it declares: its cell's synced step less the free-running one
    (:func:`fig6_compute`), for each loop."""
    return {
        f"{setup}-{p}": {loop: compute[gpu][p][f"sync_{loop}_ms"] for loop in ("per_step", "per_bucket")}
        for setup, gpu in PROFILES.items()
        for p in CELLS[gpu]
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", action="store_true", help="also the Fig. 6 compute per GPU (about 1 min of CPU)")
    parser.add_argument("--jitter", action="store_true", help="also each Fig. 6 profile's step jitter (seconds)")
    parser.add_argument("--pairs", type=int, default=400_000, help="sentence pairs sampled (default 400,000)")
    args = parser.parse_args(argv)
    gpus = tuple(sorted({p for counts in CELLS.values() for p in counts} | {1}))
    padding = padding_table(gpus, args.pairs)
    out: dict[str, Any] = {"padding": padding}
    if args.jitter:
        out["jitter"] = profile_jitter(args.pairs)
    if args.steps:
        out["compute_ms"] = fig6_compute(padding)
        out["host_sync_ms"] = profile_syncs(out["compute_ms"])
        out["fall"] = {
            gpu: {key: round(rows[min(rows)][key] / rows[max(rows)][key], 3) for key in rows[min(rows)]}
            for gpu, rows in out["compute_ms"].items()
        }
    print(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

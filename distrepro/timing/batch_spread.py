"""How much the ranks' batches differ under length-bucketed batching, and what a synchronous step pays for it.

Why: a translation trainer in the fairseq mould (NVIDIA DeepLearningExamples' Transformer,
``fairseq/data/csrc/make_batches.cpp`` and ``data_utils.py`` @ 729963dd) sorts the sentence pairs by source length,
then target length, cuts them into batches whose count times their longest ``max(source, target)`` stays within
``--max-tokens`` (the count rounded down to a multiple of ``required_batch_size_multiple``), shuffles the batches
each epoch and deals them round-robin to the ranks. So the ranks of one step train different batches. Each batch is
nearly uniform in both lengths (it is a slice of the sorted order), but batches differ in the ratio of target to
source length: where the target is the longer side the batch holds fewer source tokens, where it is the shorter,
fewer target tokens, and the two sides cost different amounts (the decoder and the output projection run on target
tokens). Every DDP step waits for the slowest rank's batch: the expected largest of p batches' work, not the mean
(:func:`slowest_factor`).

The spread is derived, not fitted: the sentence-length distribution (:class:`LengthBucketing`: the corpus's mean
tokens per sentence, a gamma shape), the target length given the source length from the length statistics of
translated text (Gale & Church 1993: target characters ~ Normal(c·l, s²·l) for a source of l characters), the
batching rule as the code states it, and the cost of a source and a target token counted from the architecture.
A per-step lognormal jitter (:data:`distrepro.timing.framework.STEP_CV`) multiplies each rank's work on top. Used by
the validation (``benchmarks/validate_emulator.py``, a source's ``batch_spread:``); no engine charges it.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

#: histogram bins of the relative batch work, and Simpson intervals of the expectation integral: one work value
#: gives :func:`distrepro.timing.framework.expected_max_factor` to 1e-5 (``tests/timing/test_batch_spread.py``), and
#: WMT14's 21,000 length pairs on 2,000 bins move the 16-rank factor by 4e-6
_BINS, _INTERVALS, _TAIL_SIGMAS = 240, 1600, 8.0


@dataclass(frozen=True)
class LengthBucketing:
    """One corpus batched by length: ``max_tokens`` (a batch's count times its longest ``max(source, target)``
    stays within it), ``batch_multiple`` (the count rounded down to a multiple of it), the source lengths in tokens
    (a gamma of mean ``mean_length`` and coefficient of variation ``length_cv``, up to ``max_length``), the target
    length given the source (``length_ratio`` target characters per source character, variance ``ratio_variance``
    per source character, ``chars_per_token`` characters a token, both lengths within ``ratio_cap`` of each other),
    and the relative cost of one source token, one target token and, per token, of each position it attends over
    (``source_cost``, ``target_cost``, ``attention_cost``); ``source`` says where each figure comes from."""

    max_tokens: int
    batch_multiple: int
    mean_length: float
    length_cv: float
    length_ratio: float
    ratio_variance: float
    chars_per_token: float
    ratio_cap: float
    source_cost: float
    target_cost: float
    attention_cost: float
    max_length: int = 250
    source: str = ""


def batch_count(spec: LengthBucketing, longest: int) -> int:
    """Sentences in a batch whose longest ``max(source, target)`` is ``longest`` tokens, as ``make_batches`` cuts
    it: as many as fit in ``max_tokens``, rounded down to a multiple of ``batch_multiple`` (kept whole when fewer)."""
    fit = max(1, spec.max_tokens // longest)
    return fit // spec.batch_multiple * spec.batch_multiple if fit >= spec.batch_multiple else fit


def batch_work(spec: LengthBucketing, source_len: int, target_len: int) -> float:
    """Relative work of one batch of sentence pairs of these lengths: its count times each pair's cost, the
    source and target tokens at their costs plus attention over the lengths attended (encoder self-attention
    ``S²``, decoder self-attention ``T²`` and cross-attention ``T·S``)."""
    n = batch_count(spec, max(source_len, target_len))
    linear = spec.source_cost * source_len + spec.target_cost * target_len
    attention = spec.attention_cost * (source_len**2 + target_len**2 + source_len * target_len)
    return n * (linear + attention)


def work_distribution(spec: LengthBucketing) -> tuple[list[float], list[float]]:
    """(work, share of the batches) of every (source, target) length pair, work relative to the mean batch's.
    A pair's share of the batches is its share of the sentences divided by its batch's count."""
    shape = 1.0 / spec.length_cv**2
    scale = spec.mean_length / shape
    works: list[float] = []
    shares: list[float] = []
    for s in range(1, spec.max_length + 1):
        p_source = math.exp((shape - 1.0) * math.log(s) - s / scale)
        sd = math.sqrt(spec.ratio_variance * s / spec.chars_per_token)
        lo, hi = max(1, math.ceil(s / spec.ratio_cap)), min(spec.max_length, math.floor(s * spec.ratio_cap))
        targets = range(lo, hi + 1)
        dens = [math.exp(-0.5 * ((t - spec.length_ratio * s) / sd) ** 2) for t in targets]
        total = sum(dens)
        if total <= 0.0:
            continue
        for t, d in zip(targets, dens, strict=True):
            works.append(batch_work(spec, s, t))
            shares.append(p_source * d / total / batch_count(spec, max(s, t)))
    norm = sum(shares)
    shares = [w / norm for w in shares]
    mean = sum(w * x for w, x in zip(shares, works, strict=True))
    return [x / mean for x in works], shares


def work_cv(spec: LengthBucketing) -> float:
    """Coefficient of variation of one batch's work across the batches of an epoch."""
    works, shares = work_distribution(spec)
    return math.sqrt(sum(w * (x - 1.0) ** 2 for x, w in zip(works, shares, strict=True)))


def _binned(works: list[float], shares: list[float]) -> tuple[list[float], list[float]]:
    """The work distribution on :data:`_BINS` bins (each bin at its shares' mean work): the integral's cost."""
    lo, hi = min(works), max(works)
    if hi - lo < 1e-12:
        return [1.0], [1.0]
    mass = [0.0] * _BINS
    moment = [0.0] * _BINS
    for x, w in zip(works, shares, strict=True):
        i = min(_BINS - 1, int((x - lo) / (hi - lo) * _BINS))
        mass[i] += w
        moment[i] += w * x
    kept = [(moment[i] / mass[i], mass[i]) for i in range(_BINS) if mass[i] > 0.0]
    return [x for x, _ in kept], [w for _, w in kept]


def expected_max(values: list[float], weights: list[float], p: int, cv: float) -> float:
    """E[max of p independent draws of X·J] / E[X]: X takes ``values`` with probabilities ``weights``, J is a
    mean-1 lognormal of coefficient of variation ``cv`` (per-step jitter). Without jitter it is the discrete
    ``Σ x_k (G_k^p − G_(k−1)^p)`` over the sorted values; with it, ``∫ (1 − F(t)^p) dt`` of the product's
    distribution ``F(t) = Σ w_k Φ((ln(t/x_k) + σ²/2)/σ)`` (Simpson). 1 for p = 1."""
    total = sum(weights)
    mean = sum(v * w for v, w in zip(values, weights, strict=True)) / total
    if p <= 1:
        return 1.0
    if cv <= 0.0:
        pairs = sorted(zip(values, weights, strict=True))
        cum, before, out = 0.0, 0.0, 0.0
        for v, w in pairs:
            cum += w / total
            out += v * (cum**p - before**p)
            before = cum
        return out / mean
    sigma = math.sqrt(math.log1p(cv * cv))
    lo = min(values) * math.exp(-_TAIL_SIGMAS * sigma)
    hi = max(values) * math.exp(_TAIL_SIGMAS * sigma)
    h = (hi - lo) / _INTERVALS
    acc = 0.0
    for i in range(_INTERVALS + 1):
        t = lo + i * h
        cdf = 0.0
        for v, w in zip(values, weights, strict=True):
            z = (math.log(t / v) + 0.5 * sigma * sigma) / sigma
            cdf += w * 0.5 * math.erfc(-z / math.sqrt(2.0))
        f = 1.0 - (cdf / total) ** p
        acc += (1 if i in (0, _INTERVALS) else (4 if i % 2 else 2)) * f
    return (lo + acc * h / 3.0) / mean


@functools.lru_cache(maxsize=64)
def slowest_factor(spec: LengthBucketing, p: int, cv: float) -> float:
    """What a synchronous step of p ranks pays over one rank's mean step, each rank training its own batch of
    ``spec``'s corpus with per-step jitter ``cv``: the expected largest of p ranks' work over the mean batch's."""
    if p <= 1:
        return 1.0
    values, weights = _binned(*work_distribution(spec))
    return expected_max(values, weights, p, cv)

"""Evaluation modes beyond "score the averaged model": the replicas' spread and BatchNorm recalibration.

Both are options of the run config's ``eval:`` block, and both engines reach them through the one
harness loop (:mod:`distrepro.engine.loop`), so they cannot differ between engines:

* ``replicas: true`` scores every replica as it stands, each on the process that holds it (the
  distributed engine evaluates in parallel, one replica per rank), and the evaluation logs
  ``replica_<metric>_{mean,std,min,max}`` over them next to the averaged model's metrics. A
  decentralised or periodically averaged method's replicas are the models its workers hold between
  averagings; how far apart their scores are is what the averaged model's score hides.
* ``bn_recalibration_batches: N`` re-estimates the BatchNorm running statistics of an averaged model
  on N training batches before scoring it. Averaging running means and variances of different
  replicas does not give the statistics of the averaged weights' activations, so an average of
  BN networks can score below its replicas (SWA recomputes them for its averaged weights for the
  same reason). As torch's
  ``torch.optim.swa_utils.update_bn``: running statistics are reset and updated with cumulative
  averaging (``momentum=None``), so the result is the mean over the N batches of each batch's
  statistics. Unlike ``update_bn``, only the BatchNorm layers are put in training mode: dropout stays
  off, so recalibrating draws nothing from torch's global random state and cannot change training.
  The batches come from their own stream of the training set, seeded from the run's seed parts
  (paper, profile, seed index: every arm of a comparison gets the same batches), and are the same
  at every evaluation. A model without BatchNorm is scored unchanged; so is a method evaluated on
  rank 0 (``evaluated_on`` says ``"rank0"``: not an average).

Neither touches a clock, a byte counter or a replica: the averaged model is a scratch copy, and
scoring a replica runs it in eval mode under ``no_grad``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence

import torch
from torch.nn.modules.batchnorm import _BatchNorm

from distrepro import metrics as M
from distrepro.api.method import Batch
from distrepro.data.loading import DatasetBundle
from distrepro.engine.evaluation import evaluate
from distrepro.engine.streams import WorkerStream, iterate_eval
from distrepro.job.resolve import Job

#: the metrics of :func:`distrepro.engine.evaluation.evaluate` summarised over replicas
REPLICA_METRICS = M.REPLICA_METRICS
REPLICA_STATS = M.REPLICA_STATS


def replica_stats(per_replica: Sequence[Mapping[str, float] | None]) -> dict[str, float]:
    """``replica_<metric>_{mean,std,min,max}`` over the replicas' metrics, given in rank order.

    Sums run in rank order, so both engines give the same floats; ``std`` is the population standard
    deviation (the spread of these n replicas, 0 when they agree), not an estimate of a wider one.
    """
    if not per_replica or any(m is None for m in per_replica):
        raise ValueError("every replica must be scored for replica statistics")
    out: dict[str, float] = {}
    n = len(per_replica)
    for name in REPLICA_METRICS:
        values = [float(m[name]) for m in per_replica if m is not None]
        total = 0.0
        for v in values:
            total += v
        mean = total / n
        square = 0.0
        for v in values:
            square += (v - mean) ** 2
        stats = {"mean": mean, "std": math.sqrt(square / n), "min": min(values), "max": max(values)}
        out.update({M.replica(name, s): stats[s] for s in REPLICA_STATS})
    return out


class ReplicaScorer:
    """Scores one replica on the evaluation split, on the replica's own device; never changes it."""

    def __init__(self, bundle: DatasetBundle, batch_size: int) -> None:
        self.bundle, self.batch_size = bundle, batch_size

    def __call__(self, model: torch.nn.Module) -> dict[str, float]:
        device = next(model.parameters()).device
        batches = iterate_eval(self.bundle, self.batch_size)
        if device.type != "cpu":
            batches = (Batch(b.inputs.to(device), b.targets.to(device)) for b in batches)
        return evaluate(model, batches)


def batchnorm_layers(model: torch.nn.Module) -> list[_BatchNorm]:
    """The BatchNorm layers of ``model`` that keep running statistics (the others have none to re-estimate)."""
    return [m for m in model.modules() if isinstance(m, _BatchNorm) and m.track_running_stats]


def recalibration_batches(
    bundle: DatasetBundle, count: int, batch_size: int, seed_parts: tuple[object, ...]
) -> list[Batch]:
    """``count`` training batches of ``batch_size`` from a stream of their own (module docstring)."""
    indices = torch.arange(bundle.split_size("train"))
    stream = WorkerStream(bundle, indices, batch_size, (*seed_parts, "bn-recalibration"))
    return [stream.next_batch() for _ in range(count)]


@torch.no_grad()
def recalibrate_bn(model: torch.nn.Module, batches: Iterable[Batch]) -> bool:
    """Replace ``model``'s BatchNorm running statistics by the mean of ``batches``' (False: no BatchNorm).

    Each layer's statistics are reset and updated with ``momentum=None`` (cumulative average over the
    batches); every other module stays in eval mode. Momenta and train/eval modes are restored.
    """
    layers = batchnorm_layers(model)
    if not layers:
        return False
    modes = {m: m.training for m in model.modules()}
    momenta = [m.momentum for m in layers]
    device = next(model.parameters()).device
    try:
        model.eval()
        for layer in layers:
            layer.reset_running_stats()
            layer.momentum = None
            layer.train()
        for batch in batches:
            model(batch.inputs.to(device))
    finally:
        for layer, momentum in zip(layers, momenta, strict=True):
            layer.momentum = momentum
        for m, training in modes.items():
            m.training = training
    return True


def recalibrate_evaluated(model: torch.nn.Module, job: Job, batch_sizes: Sequence[int]) -> None:
    """Before ``model`` (the model the harness is about to score) is scored: recalibrate its BatchNorm
    statistics if the run asks for it and ``model`` is an average of the replicas (module docstring).
    ``batch_sizes``: the run's current per-worker batch sizes (the default recalibration batch)."""
    cfg = job.config.eval
    if (
        cfg.bn_recalibration_batches == 0
        or job.method.cls.evaluated_on(job.params) != "average"
        or not batchnorm_layers(model)
    ):
        return
    size = cfg.bn_recalibration_batch_size or max(1, *batch_sizes)
    recalibrate_bn(model, recalibration_batches(job.bundle, cfg.bn_recalibration_batches, size, job.seed_parts))

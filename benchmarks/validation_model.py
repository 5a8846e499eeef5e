"""How the emulator's validation prices one published measurement, from the emulator's own code.

Why a module of its own: ``benchmarks/validate_emulator.py`` scores, folds, orders and reports; what it scores is
this: a point's compute figures and its cluster as a hardware profile (:mod:`validation_cluster`), one
data-parallel step with the framework terms its source's code pays (:data:`TERMS`, each switched off in turn by
``--ablate``), and the prediction of each kind of point (:func:`predict`). The figures' sources are in
``benchmarks/data/emulator_points.yaml`` and ``docs/emulator.md``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from validation_cluster import WORKLOAD, cluster_profile, compute_figures
from validation_scripts import (
    batch_spread_of,
    bucketing_of,
    loop_all_reduce_bytes,
    loop_extras_of,
    reducer_of,
    synced_share,
    unsynced_micro_batches,
)

from distrepro.api.overlap import DDP_BUCKET_BYTES, DDP_FIRST_BUCKET_BYTES, emulated_buckets
from distrepro.hardware.workloads import load_workloads
from distrepro.timing import batch_spread as bs
from distrepro.timing import collective_algorithms as coll
from distrepro.timing import ddp_buckets as db
from distrepro.timing import framework as fw
from distrepro.timing import weight_update as wu
from distrepro.timing.timemodel import CommCostModel, ComputeModel

#: units that are times: a prediction above the measurement is too slow (every other unit is a rate)
TIME_UNITS = frozenset({"ms/iter", "ms", "us", "s"})
#: the per-step fraction that is backward (gradient buckets become ready evenly over it), as the engine's default
BACKWARD_FRACTION = 2.0 / 3.0
#: the framework terms of a DDP step and NCCL's pipelined ring slices; ``--ablate`` switches each off in turn
TERMS = {
    "framework": True,
    "slowest_of_p": True,
    "gpu_variability": True,
    "micro_batch_averaging": True,
    "batch_spread": True,
    "contention": True,
    "layers": True,
    "loop": True,
    "update": True,
    "bucketing": True,
    "ring_slices": True,
    "ready_last": True,
}
#: NCCL's slices per ring step (:data:`distrepro.timing.collective_algorithms.RING_SLICES_PER_STEP`); the
#: ``ring_slices`` term off charges every step's latency in full, as NCCL's tuner counts it
NCCL_RING_SLICES = coll.RING_SLICES_PER_STEP


@dataclass
class Outcome:
    point: dict[str, Any]
    predicted: float
    note: str = ""

    @property
    def error(self) -> float:
        """Relative error of the quantity as published: (predicted - measured) / measured."""
        return (self.predicted - self.point["measured"]) / self.point["measured"]

    @property
    def is_time(self) -> bool:
        return self.point["unit"] in TIME_UNITS

    @property
    def signed(self) -> float:
        """The error with its sign turned so that + means predicted too fast (a rate too high, a time too short)."""
        return -self.error if self.is_time else self.error

    @property
    def verdict(self) -> str:
        """'too fast', 'too slow' or 'exact': for a time (ms/iter, us) a prediction above the measurement is slow."""
        if self.predicted == self.point["measured"]:
            return "exact"
        return "too fast" if self.signed > 0 else "too slow"

    def describe(self) -> str:
        """The row's error in words, e.g. '+13.8% (too slow)' for 222.4 predicted against 195.5 ms/iter measured."""
        return f"{self.error:+.1%} ({self.verdict})"


def ddp_step_seconds(
    compute: ComputeModel,
    cost: CommCostModel,
    tokens: int,
    grad_bytes: float,
    ranks: int,
    model: dict[str, Any] | None = None,
    memory_bytes_per_s: float | None = None,
    reducer: fw.Reducer = fw.REDUCERS["torch"],
    spread: bs.LengthBucketing | None = None,
    bucketing: db.Bucketing | None = None,
    ready_last: float = 0.0,
    micro_batches: int = 1,
) -> float:
    """One data-parallel step with PyTorch DDP's overlap (:func:`distrepro.timing.framework.ddp_step_s`): buckets
    launched on one stream as backward makes them ready, the step ending when compute and the last bucket are done.

    Buckets: cut where the source's own DDP cuts them (``bucketing``, :mod:`distrepro.timing.ddp_buckets`: PyTorch's
    1 MiB first bucket then 25 MiB, apex's ``message_size`` elements, or one bucket), over the model's per-layer
    table (``workload:``, each bucket ready when backward passes its last layer) scaled to ``grad_bytes``, else with
    the gradients ready evenly over backward but for ``ready_last`` bytes (:func:`ready_last_bytes`), launched when
    it ends; without ``bucketing`` (or with the term off) PyTorch's caps in the
    table's units and 25 MiB buckets when there is no table, as before round 10.
    Framework terms (:data:`TERMS`): the ``reducer``'s kernels per tensor (the model's ``tensors``) and per bucket
    and its passes over ``grad_bytes`` at the GPU's memory bandwidth
    (:func:`distrepro.timing.framework.reducer_seconds`) added to backward; compute x the expected slowest of
    ``ranks`` (per-step jitter; with ``spread``, each rank's own length-bucketed batch times its jitter,
    :func:`distrepro.timing.batch_spread.slowest_factor`; over ``micro_batches`` computed without a sync between
    them, :func:`distrepro.timing.framework.sync_cv`); backward slowed by the contention factor for as long
    as a bucket overlaps it."""
    model = model or {}
    t_c = synchronous_compute_seconds(compute, tokens, ranks, spread, micro_batches)
    world = list(range(ranks))
    table = load_workloads()[model["workload"]].layers if TERMS["layers"] and model.get("workload") else None
    own = bucketing if TERMS["bucketing"] else None
    if table is not None:
        scale = grad_bytes / (4.0 * table.params)
        caps = own.in_units(scale) if own is not None else (DDP_BUCKET_BYTES, DDP_FIRST_BUCKET_BYTES)
        plan = [(b.ready, cost.all_reduce(world, b.nbytes * scale)) for b in emulated_buckets(table, *caps)]
    else:  # without a bucketing: round 9's 25 MiB buckets, no small first one
        own = own or db.Bucketing(DDP_BUCKET_BYTES, DDP_BUCKET_BYTES, "25 MiB buckets (before round 10)")
        last = ready_last if TERMS["ready_last"] else 0.0
        plan = [(ready, cost.all_reduce(world, size)) for ready, size in plan_ready_last(own, grad_bytes, last)]
    overhead = 0.0
    if TERMS["framework"] and ranks > 1:
        overhead = fw.reducer_seconds(reducer, model.get("tensors", 0), len(plan), grad_bytes, memory_bytes_per_s)
    contention = fw.CONTENTION if TERMS["contention"] else 0.0
    return fw.ddp_step_s(t_c, BACKWARD_FRACTION, plan, overhead, contention)


def synchronous_compute_seconds(
    compute: ComputeModel,
    tokens: int,
    ranks: int,
    spread: bs.LengthBucketing | None = None,
    micro_batches: int = 1,
) -> float:
    """A step's compute when every rank waits for the slowest: the nominal step times the expected slowest of
    ``ranks`` (per-step jitter times each GPU's own speed, :data:`distrepro.timing.framework.SYNC_CV`; the jitter
    averaged over ``micro_batches`` run without a sync, :func:`distrepro.timing.framework.sync_cv`; with
    ``spread``, each rank's own length-bucketed batch times those)."""
    t_c = compute.nominal_step_seconds(0, tokens)
    if TERMS["slowest_of_p"]:
        k = micro_batches if TERMS["micro_batch_averaging"] else 1
        cv = fw.sync_cv(k, gpu_cv=fw.GPU_CV if TERMS["gpu_variability"] else 0.0)
        if spread is not None and TERMS["batch_spread"]:
            t_c *= bs.slowest_factor(spread, ranks, cv)
        else:
            t_c *= fw.expected_max_factor(ranks, cv)
    return t_c


def ready_last_bytes(model: dict[str, Any], grad_bytes: float) -> float:
    """Gradient bytes of the model's ``ready_last_params`` (its input embedding, alone or tied to its output layer):
    complete only when backward ends, since the embedding's backward is the step's last and a tied weight's gradient
    is whole only after its last use. 0 for a model that declares none.

    Why: a model without a layer table has its gradients ready evenly over backward (:func:`plan_ready_last`), which
    puts an embedding's bytes, a tenth to seven tenths of a language model's, at the fractions of backward their
    share would take, where DDP can only launch them at its end. The engine's layer tables list the embedding first
    (``hardware_profiles/layers/``), so the engine charges this already."""
    params = model.get("ready_last_params")
    if params is None:
        return 0.0
    total = model.get("params")
    if total is None or not 0 < params <= total:
        raise ValueError(f"ready_last_params {params} needs params at least as large (params: {total})")
    return grad_bytes * params / total


def plan_ready_last(bucketing: db.Bucketing, grad_bytes: float, last_bytes: float) -> list[tuple[float, float]]:
    """(fraction of backward done when ready, bytes) per bucket: the gradients other than ``last_bytes`` ready evenly
    over backward (:meth:`distrepro.timing.ddp_buckets.Bucketing.even_plan`), then ``last_bytes`` when backward ends:
    in the last bucket while they fit its cap, else a bucket of their own (a tensor above the cap is one bucket, in
    PyTorch's ``compute_bucket_assignment_by_size`` as in apex's ``message_size`` buckets)."""
    if last_bytes <= 0:
        return bucketing.even_plan(grad_bytes)
    if last_bytes >= grad_bytes:
        return [(1.0, grad_bytes)]
    plan = bucketing.even_plan(grad_bytes - last_bytes)
    if last_bytes > bucketing.cap_bytes:
        return [*plan, (1.0, last_bytes)]
    *head, (_, tail) = plan
    return [*head, (1.0, tail + last_bytes)]


def loop_seconds(
    data: dict[str, Any], point: dict[str, Any], cost: CommCostModel, grad_bytes: float, bandwidth: float | None
) -> float:
    """Seconds the source's training loop adds per step outside DDP (:func:`distrepro.timing.framework.
    loop_extras_seconds`), its small all-gather and all-reduce (``all_reduce_bytes``, optional) priced by the
    collective model; 0 when switched off or not counted."""
    extras = loop_extras_of(data, point)
    if extras is None or not TERMS["loop"]:
        return 0.0
    ranks = point["gpus"]
    collectives = 0.0
    if extras.all_gather_bytes and ranks > 1:
        collectives += cost.all_gather(range(ranks), extras.all_gather_bytes)
    reduce_bytes = loop_all_reduce_bytes(data, point)
    if reduce_bytes and ranks > 1:  # a small all-reduce the host waits for (a loss averaged over the ranks)
        collectives += cost.all_reduce(range(ranks), reduce_bytes)
    tensors = data["models"][point["model"]].get("tensors", 0)
    return fw.loop_extras_seconds(extras, ranks, tensors, grad_bytes, bandwidth, collectives)


def update_seconds_of(data: dict[str, Any], point: dict[str, Any], bandwidth: float | None) -> float:
    """Seconds per micro-batch the point pays for its optimizer update beyond its 1-GPU row, when the two accumulate
    gradients differently (a fixed global batch: the point's ``accumulation: {point, row}``, micro-batches per
    update; :func:`distrepro.timing.weight_update.accumulation_delta_s`), the update counted from the source's code
    (its ``update:``, bytes per parameter by the point's ``precision``); 0 when switched off or not counted."""
    block = data["sources"][point["source"]].get("update")
    accumulation = point.get("accumulation")
    if block is None or accumulation is None or not TERMS["update"] or not bandwidth:
        return 0.0
    model = data["models"][point["model"]]
    precision = point.get("precision", "fp32")
    if precision not in block["bytes_per_param"]:
        raise ValueError(f"point {point['id']}: precision {precision!r} is none of {sorted(block['bytes_per_param'])}")
    update = wu.WeightUpdate(block["bytes_per_param"][precision], block["kernels_per_tensor"], str(block["source"]))
    update_s = wu.update_seconds(update, model["params"], model.get("tensors", 0), bandwidth)
    return wu.accumulation_delta_s(update_s, accumulation["point"], accumulation["row"])


# ---------------------------------------------------------------------- predictions per kind


def predict_compute(data: dict[str, Any], point: dict[str, Any]) -> Outcome:
    t_fixed, peak = compute_figures(data, point, point["gpu"])
    profile = cluster_profile(data, "dgx-a100", 1, t_fixed, peak)  # links unused: one GPU
    compute = ComputeModel(profile, WORKLOAD, 1.0)
    step = compute.nominal_step_seconds(0, point["tokens_per_gpu"])
    note = f"t_fixed {t_fixed * 1e3:.1f} ms, peak {peak:,.0f} tok/s"
    return Outcome(point, point["tokens_per_gpu"] / step, note)


def predict_ddp(data: dict[str, Any], point: dict[str, Any]) -> Outcome:
    gpu = data["clusters"][point["cluster"]]["gpu"]
    t_fixed, peak = compute_figures(data, point, gpu)
    profile = cluster_profile(data, point["cluster"], point["gpus"], t_fixed, peak)
    compute = ComputeModel(profile, WORKLOAD, 1.0)
    cost = CommCostModel(profile)
    model = data["models"][point["model"]]
    grad = point.get("grad_bytes", model["grad_bytes"])
    try:
        last = ready_last_bytes(model, grad)
    except ValueError as exc:
        raise ValueError(f"point {point['id']}: model {point['model']}: {exc}") from None
    memory = data["gpus"][gpu].get("memory_gbytes_per_s")
    bandwidth = memory * 1e9 if memory else None
    reducer = reducer_of(data, point)
    spread = batch_spread_of(data, point)
    bucket_name, bucketing = bucketing_of(data, point, grad)
    tokens, ranks = point["tokens_per_gpu"], point["gpus"]
    step = ddp_step_seconds(
        compute,
        cost,
        tokens,
        grad,
        ranks,
        model,
        bandwidth,
        reducer,
        spread,
        bucketing,
        last,
        unsynced_micro_batches(point),
    )
    share = synced_share(data, point)
    if share < 1.0:  # the other micro-batches of an update: compute alone, still waiting for the slowest rank
        step = share * step + (1.0 - share) * synchronous_compute_seconds(compute, tokens, ranks, spread)
    step += loop_seconds(data, point, cost, grad, bandwidth)
    step += update_seconds_of(data, point, bandwidth)
    how = cost.collective("all_reduce", range(point["gpus"]), DDP_BUCKET_BYTES)
    note = f"step {step * 1e3:.1f} ms (compute {compute.nominal_step_seconds(0, point['tokens_per_gpu']) * 1e3:.1f}); "
    note += f"25 MiB bucket: {how.algorithm}/{how.protocol} {how.seconds * 1e3:.2f} ms; buckets {bucket_name}"
    return Outcome(point, point["gpus"] * point["tokens_per_gpu"] / step, note)


def predict_nccl(data: dict[str, Any], point: dict[str, Any]) -> Outcome:
    n = point["gpus"]
    profile = cluster_profile(data, point["cluster"], n)
    how = CommCostModel(profile).collective("all_reduce", range(n), point["bytes"])
    note = f"{how.algorithm}/{how.protocol}, {how.seconds * 1e6:.1f} us"
    if point["unit"] == "us":
        return Outcome(point, how.seconds * 1e6, note)
    return Outcome(point, point["bytes"] / how.seconds * 2 * (n - 1) / n / 1e9, note)


def engine_cell_ms(raw: dict[str, Any]) -> float:
    """ms per iteration of a Decent-DP grid cell's run config (``fig6.cell_config``), run by the in-process engine
    alone on its first seed: nothing logged."""
    from distrepro.config.run_config import validate_config
    from distrepro.job.resolve import build_job
    from distrepro.orchestration.campaign import get_engine
    from distrepro.plugins.registry import plugin_module

    cfg = validate_config(raw)
    run = get_engine(cfg.engine).run_cell(build_job(cfg, cfg.seeds[0]), None)
    return plugin_module("decentdp", "fig6").ms_per_iter(run.evals)


#: engine cells of methods the Fig. 6 grid does not run (Fig. 7's AccumAdam on the complete topology): the grid method
#: whose run config a cell takes, and the method params that replace that method's own
OFF_GRID_METHODS: dict[str, tuple[str, dict[str, Any]]] = {"decent-complete": ("decent-aer", {"topology": "complete"})}


def engine_cell_config(point: dict[str, Any]) -> dict[str, Any]:
    """The run config of an engine cell: the Decent-DP grid's cell on the shipped profile; a method the grid does not
    run (:data:`OFF_GRID_METHODS`) takes its grid method's config with its own params."""
    from distrepro.plugins.registry import plugin_module

    fig6 = plugin_module("decentdp", "fig6")
    method = point["method"]
    grid_method, params = OFF_GRID_METHODS.get(method, (method, None))
    steps = fig6.cell_steps(method, point["gpus"], point["setup"])
    workload = point.get("workload", fig6.WORKLOAD)
    raw = fig6.cell_config(point["setup"], point["gpus"], grid_method, steps, workload, point.get("batch_per_gpu"))
    if params is not None:
        raw["method_params"] = params
    return raw


def predict_engine(point: dict[str, Any]) -> Outcome:
    """The engine cell's config (:func:`engine_cell_config`) run by the in-process engine alone (nothing logged)."""
    raw = engine_cell_config(point)
    return Outcome(point, engine_cell_ms(raw), f"in-process engine, hardware_profiles/{raw['profile']}.yaml")


def predict(data: dict[str, Any], point: dict[str, Any]) -> Outcome:
    """One point's prediction, with the ``ring_slices`` term as :data:`TERMS` says; the collective model's slice
    count is set for this prediction only and restored after it, so no caller sees it changed."""
    saved = coll.RING_SLICES_PER_STEP
    coll.RING_SLICES_PER_STEP = NCCL_RING_SLICES if TERMS["ring_slices"] else 1
    try:
        return _predict(data, point)
    finally:
        coll.RING_SLICES_PER_STEP = saved


def _predict(data: dict[str, Any], point: dict[str, Any]) -> Outcome:
    kind = point["kind"]
    if kind == "compute_throughput":
        return predict_compute(data, point)
    if kind == "ddp_throughput":
        return predict_ddp(data, point)
    if kind == "nccl_allreduce":
        return predict_nccl(data, point)
    if kind == "engine_cell":
        return predict_engine(point)
    raise ValueError(f"point {point['id']}: unknown kind {kind!r}")

"""``distrepro plan``: everything a run config resolves to, said before anything trains.

Why: a paper-scale config costs hours on a cluster; its allocation, LR schedule, number of Local SGD
rounds and rough emulated time should be checkable in seconds on a laptop, where the paper's data is
absent. The plan therefore builds the job the engines would build (same validation, same errors),
except that the dataset is *described* rather than loaded when its plugin can (an optional
``describe(params) -> DatasetShape`` next to ``build``): classes, input shape and split sizes are all a
plan needs. A plugin without ``describe`` is built, and when that fails for want of data the plan says
so instead of guessing.

The time estimate is analytical: compute from each worker's declared step cost for its allocated batch
(``t_fixed + b / peak``; no jitter, stragglers or speed changes), communication from the method's own plan
(:meth:`distrepro.api.method.Method.plan`, a typed :class:`~distrepro.api.MethodPlan` of transfers) priced by the
collective model with the algorithm and protocol each call runs with (:mod:`distrepro.timing.collective_algorithms`;
:mod:`distrepro.orchestration.plan_time`); a method that does not say what it sends is "not estimated".
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from distrepro.api.method import PlanSetting
from distrepro.api.plan import MethodPlan, ParamShape
from distrepro.config.overrides import Override, parse_override
from distrepro.config.run_config import RunConfig, load_config
from distrepro.data.loading import DatasetBundle, DatasetShape, build_dataset
from distrepro.errors import ConfigError, PluginError
from distrepro.hardware.cluster_layout import cluster_layout
from distrepro.hardware.flops import param_bytes
from distrepro.job.resolve import Job, _dataset_seed, build_job, missing_requirements
from distrepro.orchestration.budget_check import check_budget
from distrepro.orchestration.plan_time import NOT_ESTIMATED, estimate
from distrepro.plugins.registry import get_dataset

#: the version of :func:`build_plan`'s JSON: 2 is the typed method plan (``method_plan.transfers``, each priced
#: in ``time.collectives``), which replaced version 1's untyped ``method_plan.comm``
PLAN_FORMAT = 2

#: LR points shown (evenly spaced steps, plus the end of the warm-up)
LR_POINTS = 5


class _Sized:
    """A split of ``n`` samples that cannot be read: the plan needs sizes, never samples."""

    def __init__(self, n: int, what: str) -> None:
        self.n, self.what = n, what

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, index: int) -> Any:
        raise RuntimeError(f"{self.what}: a plan reads no data")


def _bundle(cfg: RunConfig, source: str | Path | None) -> tuple[DatasetBundle, dict[str, Any]]:
    """The dataset as described by its plugin (no data read), else as built; and what the plan says of it."""
    try:
        plugin = get_dataset(cfg.dataset.name)
    except PluginError as exc:
        raise ConfigError(source, "dataset.name", str(exc)) from None
    describe = getattr(plugin, "describe", None)
    if describe is None:
        bundle = build_dataset(plugin, cfg.dataset.params, cfg.dataset.root, _dataset_seed(cfg), source)
        return bundle, {"resolved_from": "data"}
    try:
        shape: DatasetShape = describe(plugin.Params.model_validate(dict(cfg.dataset.params or {})))
    except Exception:  # invalid params: let the loader report them as it would for a run
        build_dataset(plugin, cfg.dataset.params, cfg.dataset.root, _dataset_seed(cfg), source)
        raise
    name = cfg.dataset.name
    bundle = DatasetBundle(
        name=name,
        train=_Sized(shape.train_size, name),
        test=_Sized(shape.test_size, name),
        num_classes=shape.num_classes,
        input_shape=shape.input_shape,
    )
    info: dict[str, Any] = {"resolved_from": "declared shape (no data read)"}
    if shape.note:
        info["note"] = shape.note
    return bundle, info


def _shape_only_model(job: Job) -> Any:
    """The model on the meta device: shapes and dtypes without memory or initialisation, all a plan's byte
    counts need (ViT-B/16 builds in milliseconds instead of half a minute on a busy CPU). A model whose
    constructor needs real tensors is built normally."""
    import torch

    try:
        with torch.device("meta"):
            return job.make_model()
    except Exception:  # e.g. a constructor that reads tensor values
        return job.make_model()


def _state_bytes(job: Job, model: Any) -> float:
    floats = sum(b.numel() * b.element_size() for b in model.buffers() if b.is_floating_point())
    return (param_bytes(model) + floats) * job.bytes_scale


def _parameter_shapes(model: Any) -> tuple[ParamShape, ...]:
    """Every parameter (name, shape, bytes per element) in backward order: the reverse of registration, the
    order gradients become ready in and DDP fills its buckets in."""
    named = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
    return tuple(ParamShape(n, tuple(p.shape), p.element_size()) for n, p in reversed(named))


def build_plan(config: str | Path, overrides: Sequence[Override | str] | None = None) -> dict[str, Any]:
    """The plan of ``config`` (keys ``plan_format``, ``source``, ``config``, ``requires``, ``cluster``, ``dataset``,
    ``allocation``, ``lr``, ``method_plan``, ``time``, ``training``). A method's missing optional extra is reported,
    not an error: planning runs none of its code.

    ``overrides``: parsed ones (``distrepro plan --set``), or ``KEY=VALUE`` texts as a plugin's report hook gives
    them (:meth:`distrepro.api.report_context.ReportContext.plan`, whose contract is text), read here once."""
    parsed = [o if isinstance(o, Override) else parse_override(o) for o in overrides or ()]
    cfg = load_config(config, parsed)
    bundle, dataset = _bundle(cfg, config)
    job = build_job(cfg, cfg.seeds[0], config, bundle=bundle, check_requires=False)
    check_budget(job, config)  # what a run would refuse, a plan refuses too
    alloc = job.allocate(0)
    missing = missing_requirements(job.method)
    dataset |= {"train_size": len(bundle.train), "test_size": len(bundle.test)}
    dataset |= {"num_classes": bundle.num_classes, "input_shape": list(bundle.input_shape)}
    plan = job.lr_plan
    model = _shape_only_model(job)
    setting = PlanSetting(
        cluster=job.cluster_view(0, None),
        allocation=alloc,
        total_steps=plan.total_steps,
        steps_per_epoch=plan.steps_per_epoch,
        model_bytes=param_bytes(model) * job.bytes_scale,
        state_bytes=_state_bytes(job, model),
        lr_schedule=plan.schedule,
        layout=cluster_layout(job.profile),
        parameters=_parameter_shapes(model),
        bytes_scale=job.bytes_scale,
    )
    method_plan = job.method.cls.plan(job.params, setting)
    if method_plan is not None and not isinstance(method_plan, MethodPlan):
        where = f"{job.method.name}: Method.plan"
        raise PluginError(f"{where} returned {type(method_plan).__name__}; it must return api.MethodPlan or None")
    if plan.schedule is None:
        lr: Any = "the method declares no peak learning rate"
    else:
        lr = {"total_steps": plan.total_steps, "points": [[s, v] for s, v in plan.schedule.points(LR_POINTS)]}
    allocation = {
        "shares": list(alloc.shares),
        "batch_sizes": list(alloc.batch_sizes),
        "partition": alloc.partition,
        "speeds": list(alloc.speeds) if alloc.speeds else None,
        "note": "epoch 0, from declared speeds; re-allocations from measured speeds happen during the run",
    }
    return {
        "plan_format": PLAN_FORMAT,
        "source": str(config),
        "config": cfg.model_dump(mode="json"),
        "requires": f"to run: {', '.join(missing)}" if missing else "installed",
        "cluster": _cluster(job),
        "dataset": dataset,
        "allocation": allocation,
        "lr": lr,
        "method_plan": method_plan.to_json() if method_plan is not None else NOT_ESTIMATED,
        "time": estimate(job, setting, method_plan),
        "training": _training(job, alloc),
    }


def _cluster(job: Job) -> dict[str, Any]:
    """The emulated cluster: its profile, its devices by name, how many and how many of them are GPUs (``kind:
    gpu``): the figure a GPU-hour count multiplies the emulated time by."""
    devices = [job.profile.device(r) for r in range(job.world_size)]
    names: dict[str, int] = {}
    for device in devices:
        names[device.name] = names.get(device.name, 0) + 1
    gpus = sum(1 for device in devices if device.kind == "gpu")
    return {"profile": job.profile.name, "devices": len(devices), "gpus": gpus, "by_name": names}


def cpu_warning(device: str, gpus: int) -> str | None:
    """Why a recipe that names GPUs (``gpus`` emulated GPUs, or ``device: cuda``) would train on this machine's CPU,
    in words, else None: ``device: cpu`` with GPUs emulated, or ``auto``/``cuda`` where torch sees no CUDA."""
    if device == "cpu":
        if not gpus:
            return None
        return f"the profile emulates {gpus} GPUs but device: cpu trains on the CPU; on a GPU machine --set device=cuda"
    if device == "auto" and not gpus:
        return None
    from distrepro.hardware.device import cuda_absent_reason

    absent = cuda_absent_reason()
    if absent is None:
        return None
    return f"device: {device} asks for a GPU, but {absent}: {'the CPU trains' if device == 'auto' else 'a run refuses'}"


def _training(job: Job, alloc: Any) -> dict[str, Any]:
    """The real arithmetic of the run: what the CPU or GPU that trains it must compute, whatever the emulated
    clock says (``time`` above is the emulated cluster's; this is the host's work). FLOPs are the trained model's
    own count (:func:`distrepro.hardware.flops.train_flops_per_sample`, forward + backward, no optimizer), per seed
    and for every seed of the config; evaluation is a forward pass (a third of a training sample's FLOPs) over
    the test split at each scheduled evaluation. Divided by a device's sustained rate, this is a wall-time
    estimate; the GPU recipes' READMEs do that with a cited rate."""
    cfg = job.config
    n = len(job.bundle.train)
    per_sample = job.proxy_flops_per_sample
    out: dict[str, Any] = {"device": cfg.device, "train_flops_per_sample": per_sample}
    budget = cfg.budget
    if budget.unit == "emulated_seconds":
        out["samples_per_seed"] = NOT_ESTIMATED
        return out
    samples = budget.amount * n if budget.unit == "epochs" else budget.amount
    if budget.unit == "steps":
        samples = budget.amount * sum(alloc.batch_sizes)
    epochs = samples / n
    every = cfg.eval
    if every.every_epochs:
        evals = math.floor(epochs / every.every_epochs + 1e-9) + 1
    elif every.every_steps and budget.unit == "steps":
        evals = math.floor(budget.amount / every.every_steps) + 1
    else:
        evals = every.times
    eval_flops = evals * len(job.bundle.test) * per_sample / 3
    per_seed = samples * per_sample + eval_flops
    out |= {
        "samples_per_seed": samples,
        "epochs_per_seed": epochs,
        "evaluations_per_seed": evals,
        "flops_per_seed": per_seed,
        "seeds": len(cfg.seeds),
        "flops_all_seeds": per_seed * len(cfg.seeds),
    }
    return out


def _short(value: Any, limit: int = 12) -> str:
    if isinstance(value, list) and len(value) > limit:
        return json.dumps(value[:limit])[:-1] + f", … ({len(value)} in all)]"
    return json.dumps(value) if not isinstance(value, str) else value


def render(plan: dict[str, Any]) -> str:
    """The plan for a person: one section per key, long lists cut."""
    lines = ["config:"]
    cfg = plan["config"]
    for key in ("method", "method_params", "profile", "dataset", "model", "budget", "batch_size", "schedule", "device"):
        lines.append(f"  {key}: {_short(cfg.get(key))}")
    lines.append(f"requires: {plan['requires']}")
    source = str(plan.get("source") or "")
    gpus = plan["cluster"]["gpus"] if source.endswith((".gpu.yaml", ".paper.yaml")) else 0
    warning = cpu_warning(str(cfg.get("device")), gpus)
    for section in ("cluster", "dataset", "allocation", "lr", "method_plan", "time", "training"):
        value = plan[section]
        if not isinstance(value, dict):
            lines.append(f"{section}: {value}")
            continue
        lines.append(f"{section}:")
        for k, v in value.items():
            if k == "collectives":
                lines.append("  collectives:")
                lines.extend(f"    {_collective_line(c)}" for c in v)
            elif k == "expected":
                lines.append(f"  expected: {_expected_line(v)}")
            else:
                lines.append(f"  {k}: {_short(v)}")
    if warning is not None:
        lines.append(f"warning: {warning}")
    return "\n".join(lines)


def _collective_line(c: dict[str, Any]) -> str:
    """``all_reduce of 252.4 MB: ring / simple, 0.1703 s (latency 0.21 ms), 1 per step``."""
    how = f"{c['algorithm']} / {c['protocol']}, " if "algorithm" in c else ""
    size = f" of {c['bytes'] / 1e6:.1f} MB over {c['ranks']} ranks" if "bytes" in c else ""
    lat = f" (latency {c['latency_s'] * 1e3:.3g} ms)" if "latency_s" in c else ""
    return f"{c['pattern']}{size}: {how}{c['seconds']:.4g} s{lat}, {c['per_step']:.3g} per step"


def _expected_line(e: dict[str, Any]) -> str:
    """``×1.060 on compute (the slowest of p, noise as declared): 0.4459 s a step, 11.59 h in all``."""
    total = e["total_s"]
    run = f", {total / 3600:.2f} h in all" if isinstance(total, float) else ""
    factor = f"×{e['compute_factor']:.3f} on compute (the slowest of p, noise as declared)"
    return f"{factor}: {e['step_s']:.4g} s a step{run}"

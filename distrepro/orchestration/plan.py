"""``distrepro plan``: everything a run config resolves to, said before anything trains.

Why: a paper-scale config costs hours on a cluster; its allocation, LR schedule, number of Local SGD
rounds and rough emulated time should be checkable in seconds on a laptop, where the paper's data is
absent. The plan therefore builds the job the engines would build (same validation, same errors),
except that the dataset is *described* rather than loaded when its plugin can (an optional
``describe(params) -> DatasetShape`` next to ``build``): classes, input shape and split sizes are all a
plan needs. A plugin without ``describe`` is built, and when that fails for want of data the plan says
so instead of guessing.

The time estimate is analytical: compute from each worker's declared speed for its allocated batch
(no jitter, stragglers or speed changes), communication from the method's own plan (:meth:`distrepro.api.method.
Method.plan`, ``comm``) priced by the alpha-beta model, lockstep with no overlap; methods that do not
say what they send are "not estimated".
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from distrepro.api.method import PlanSetting
from distrepro.config.run_config import RunConfig, load_config
from distrepro.data.loading import DatasetBundle, DatasetShape, build_dataset
from distrepro.errors import ConfigError, PluginError
from distrepro.hardware.flops import param_bytes
from distrepro.orchestration.job import Job, _dataset_seed, build_job, missing_requirements
from distrepro.plugins.registry import get_dataset
from distrepro.timing.timemodel import CommCostModel

NOT_ESTIMATED = "not estimated"
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


def _price(job: Job, cost: CommCostModel, entry: dict[str, Any]) -> float | None:
    """Seconds of one ``comm`` entry of a method plan (one occurrence), or None for a pattern not priced here."""
    ranks = list(range(job.world_size))
    nbytes = float(entry["bytes"])
    pattern = entry.get("pattern")
    if pattern == "all_reduce":
        return cost.ring_all_reduce(ranks, nbytes)
    if pattern == "reduce_scatter":
        return cost.reduce_scatter(ranks, nbytes)
    if pattern == "parameter_server":
        return cost.parameter_server(ranks, nbytes)
    if pattern == "all_gather":  # ``bytes``: the gathered vector, as ``Comm.charge`` counts it
        return cost.all_gather(ranks, nbytes / len(ranks))
    if pattern == "broadcast":
        return cost.broadcast(ranks, 0, nbytes)
    return None


def _time(job: Job, setting: PlanSetting, method_plan: dict[str, Any] | None) -> dict[str, Any]:
    alloc, steps = setting.allocation, setting.total_steps
    compute = [b / job.compute.declared_samples_per_s(r) if b > 0 else 0.0 for r, b in enumerate(alloc.batch_sizes)]
    out: dict[str, Any] = {"compute_s_per_step": compute, "slowest_compute_s_per_step": max(compute)}
    comm = (method_plan or {}).get("comm")
    if not job.method.cls.synchronous or not isinstance(comm, list):
        why = "asynchronous" if not job.method.cls.synchronous else "the method does not say what it sends"
        out.update(comm_s_per_step=NOT_ESTIMATED, step_s=NOT_ESTIMATED, total_s=NOT_ESTIMATED, why=why)
        return out
    per_step = 0.0
    cost = job.cost.noise_free()  # a plan's figure is the central one, not one random draw of the link noise
    for entry in comm:
        price = _price(job, cost, entry)
        if price is None or ("count" in entry and not steps):
            out.update(comm_s_per_step=NOT_ESTIMATED, step_s=NOT_ESTIMATED, total_s=NOT_ESTIMATED)
            out["why"] = f"pattern {entry.get('pattern')!r} not priced" if price is None else "steps unknown"
            return out
        per_step += price * (entry["per_step"] if "per_step" in entry else entry["count"] / steps)
    step_s = max(compute) + per_step
    out.update(comm_s_per_step=per_step, step_s=step_s, total_s=step_s * steps if steps else NOT_ESTIMATED)
    out["assumes"] = "declared speeds, lockstep, no overlap of compute and communication"
    return out


def build_plan(config: str | Path, overrides: list[str] | None = None) -> dict[str, Any]:
    """The plan of ``config`` (keys ``config``, ``requires``, ``dataset``, ``allocation``, ``lr``, ``method_plan``,
    ``time``). A method's missing optional extra is reported, not an error: planning runs none of its code."""
    cfg = load_config(config, overrides)
    bundle, dataset = _bundle(cfg, config)
    job = build_job(cfg, cfg.seeds[0], config, bundle=bundle, check_requires=False)
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
    )
    method_plan = job.method.cls.plan(job.params, setting)
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
        "config": cfg.model_dump(mode="json"),
        "requires": f"to run: {', '.join(missing)}" if missing else "installed",
        "dataset": dataset,
        "allocation": allocation,
        "lr": lr,
        "method_plan": method_plan if method_plan is not None else NOT_ESTIMATED,
        "time": _time(job, setting, method_plan),
    }


def _short(value: Any, limit: int = 12) -> str:
    if isinstance(value, list) and len(value) > limit:
        return json.dumps(value[:limit])[:-1] + f", … ({len(value)} in all)]"
    return json.dumps(value) if not isinstance(value, str) else value


def render(plan: dict[str, Any]) -> str:
    """The plan for a person: one section per key, long lists cut."""
    lines = ["config:"]
    cfg = plan["config"]
    for key in ("method", "method_params", "profile", "dataset", "model", "budget", "batch_size", "schedule"):
        lines.append(f"  {key}: {_short(cfg.get(key))}")
    lines.append(f"requires: {plan['requires']}")
    for section in ("dataset", "allocation", "lr", "method_plan", "time"):
        value = plan[section]
        if not isinstance(value, dict):
            lines.append(f"{section}: {value}")
            continue
        lines.append(f"{section}:")
        lines.extend(f"  {k}: {_short(v)}" for k, v in value.items())
    return "\n".join(lines)

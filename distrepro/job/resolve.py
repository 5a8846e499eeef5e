"""A job: one (method, profile, seed) run with every piece resolved and validated.

Building a job touches every user input (config, method params, profile, dataset, model,
workload), so all their errors surface here, before any training starts, each naming its file
and field. Engines receive a finished :class:`Job` and never parse user input themselves.
"""

from __future__ import annotations

import functools
import importlib.util
import json
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

import torch

from distrepro.api.method import Allocation, Batch, ClusterView, DeviceView, MethodParams
from distrepro.config.run_config import RunConfig, resolve_method
from distrepro.data.loading import DatasetBundle, build_dataset
from distrepro.errors import ConfigError, PluginError
from distrepro.hardware.flops import param_bytes, train_flops_per_sample
from distrepro.hardware.profiles import HardwareProfile, load_profile
from distrepro.hardware.workloads import Workload, get_workload
from distrepro.plugins.registry import MethodPlugin, get_dataset
from distrepro.seeding import derive_seed
from distrepro.timing.timemodel import CommCostModel, ComputeModel
from distrepro.training.ingredients import LRPlan, check_optimizer, lr_plan
from distrepro.training.models import build_model


@dataclass
class Job:
    config: RunConfig
    seed: int
    method: MethodPlugin
    params: MethodParams
    profile: HardwareProfile
    bundle: DatasetBundle
    batch_sizes: tuple[int, ...]
    workload: Workload | None
    proxy_flops_per_sample: float
    proxy_param_bytes: int
    compute: ComputeModel
    cost: CommCostModel
    bytes_scale: float
    #: (paper, profile, seed index): the initial model, partition and data order, shared by every arm
    seed_parts: tuple[object, ...]
    #: (paper, method, profile, seed index): the method's own randomness and the clock's noise
    method_seed_parts: tuple[object, ...] = ()
    #: the config file the job came from, named by the errors found while resolving it
    source: str | Path | None = None

    @cached_property
    def lr_plan(self) -> LRPlan:
        """The run's LR for every step and its length in steps, bound once to the global batch of the epoch-0
        allocation from declared speeds (an allocation's global batch does not depend on measured speeds):
        both engines, ``ctx.lr``/``ctx.total_steps`` and ``distrepro plan`` read this one plan."""
        alloc = self.allocate(0)
        return lr_plan(self.config, self.params, len(self.bundle.train), alloc.batch_sizes, self.source)

    @property
    def world_size(self) -> int:
        return self.profile.world_size

    @property
    def experiment(self) -> str:
        return f"distrepro/{self.config.paper or 'adhoc'}"

    def make_model(self) -> torch.nn.Module:
        """The initial model, identical on every worker (seeded by the run, not the rank)."""
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(derive_seed(*self.seed_parts, "model-init"))
            return build_model(
                self.config.model.name,
                self.bundle.num_classes,
                self.bundle.input_shape,
                **self.config.model.params,
            )

    def compute_seconds(self, rank: int, n: int, step_index: int, at_s: float) -> float:
        return self.compute.step_seconds(rank, n, step_index, at_s)

    def cluster_view(
        self,
        epoch: int,
        measured: tuple[float, ...] | None,
        current: Allocation | None = None,
        profiled: tuple[float, ...] | None = None,
    ) -> ClusterView:
        return ClusterView(
            self.world_size,
            self.device_views,
            len(self.bundle.train),
            self.batch_sizes,
            epoch,
            measured,
            current,
            profiled,
        )

    @cached_property
    def device_views(self) -> tuple[DeviceView, ...]:
        """What the method may know of each rank's device, built once per job: the allocation reads it at every
        epoch, and the sensitivity replay re-allocates thousands of times per report."""
        return tuple(
            DeviceView(
                rank=r,
                name=self.profile.device(r).name,
                kind=self.profile.device(r).kind,
                declared_samples_per_s=self.compute.declared_samples_per_s(r),
                memory_gib=self.profile.device(r).memory_gib,
            )
            for r in range(self.world_size)
        )

    def allocate(
        self,
        epoch: int,
        measured: tuple[float, ...] | None = None,
        current: Allocation | None = None,
        profiled: tuple[float, ...] | None = None,
    ) -> Allocation:
        """The method's allocation for what the cluster looks like at ``epoch`` (both engines)."""
        return self.method.cls.allocate(self.params, self.cluster_view(epoch, measured, current, profiled))

    @cached_property
    def example_batch(self) -> Batch:
        x, y = self.bundle.train[0]
        return Batch(torch.as_tensor(x).unsqueeze(0), torch.as_tensor(y).reshape(1))

    def describe_time_model(self) -> dict[str, str]:
        """What was measured and what was emulated, for tags and reports."""
        charged = self.workload.name if self.workload else f"proxy:{self.config.model.name}"
        tags = {
            "time.model": "virtual (alpha-beta network, profile throughput or FLOP/s compute)",
            "time.charged_workload": charged,
            "time.trained_proxy": f"{self.config.model.name} on {self.config.dataset.name}",
            "time.flops_per_sample": f"{self.compute.flops_per_sample:.4g}",
            "time.proxy_flops_per_sample": f"{self.proxy_flops_per_sample:.4g}",
            "time.bytes_scale": f"{self.bytes_scale:.6g}",
        }
        note = self.compute.fallback_note()
        if note is not None:  # a named workload charged from FLOP/s on some device: the run must say so
            tags["time.fallback"] = note
        return tags


def warn_time_fallbacks(jobs: Sequence[Job]) -> None:
    """Print each distinct FLOP/s fallback of ``jobs`` once (seeds share a profile and workload).

    Only devices with measured throughputs for other workloads are warned about
    (:meth:`~distrepro.timing.timemodel.ComputeModel.fallback_note`); every fallback is in the ``time.fallback``
    tag. Called by the parent process only, not by the distributed engine's ranks (which build their
    own jobs), so a campaign says it once however many seeds and ranks it has.
    """
    notes = (job.compute.fallback_note(measured_only=True) for job in jobs)
    for note in dict.fromkeys(n for n in notes if n is not None):
        print(f"distrepro: warning: {note}", file=sys.stderr, flush=True)


def _batch_sizes(cfg: RunConfig, profile: HardwareProfile, source: str | Path | None) -> tuple[int, ...]:
    k = profile.world_size
    if cfg.batch_size == "profile":
        sizes = []
        for r in range(k):
            b = profile.device(r).batch_size
            if b is None:
                raise ConfigError(
                    profile.origin,
                    f"{profile.device_path(r)}.batch_size",
                    "batch_size: profile needs a batch_size on every device group",
                )
            sizes.append(b)
        return tuple(sizes)
    if isinstance(cfg.batch_size, list):
        if len(cfg.batch_size) != k:
            raise ConfigError(source, "batch_size", f"{len(cfg.batch_size)} batch sizes for {k} workers")
        return tuple(cfg.batch_size)
    return (int(cfg.batch_size),) * k


def _dataset_seed(cfg: RunConfig) -> int:
    """The data is the problem, not a random draw of the run: fixed across seeds and methods."""
    return derive_seed("dataset", cfg.dataset.name, json.dumps(cfg.dataset.params, sort_keys=True, default=str))


def _importable(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # a broken or blocked install counts as absent
        return False


def missing_requirements(method: MethodPlugin) -> list[str]:
    """The modules ``method.cls.requires`` names that are not installed, each with how to get it."""
    return [f"'{mod}' ({how})" for mod, how in method.cls.requires.items() if not _importable(mod)]


def _probe(cfg: RunConfig, bundle: DatasetBundle, source: str | Path | None) -> tuple[float, int]:
    """Training FLOPs per sample and parameter bytes of the configured model (:func:`_count_model`); a model the
    config names wrongly is a :class:`ConfigError` naming ``source``, the config file (the model builder knows
    only the field)."""
    c, h, w = bundle.input_shape
    shape = (int(c), int(h), int(w))
    try:
        try:
            params = json.dumps(cfg.model.params, sort_keys=True)
        except (TypeError, ValueError):  # not JSON (no YAML value is): counted, not kept
            return _count_model(cfg.model.name, bundle.num_classes, shape, cfg.model.params)
        return _count_model_once(cfg.model.name, bundle.num_classes, shape, params)
    except ConfigError as exc:
        if exc.source is None and source is not None:
            raise ConfigError(source, exc.field, exc.message) from None
        raise


@functools.lru_cache(maxsize=64)
def _count_model_once(name: str, num_classes: int, input_shape: tuple[int, int, int], params: str) -> tuple[float, int]:
    """:func:`_count_model`, once per process for each model, classes, input shape and params (their JSON).

    The models are the built-in ones of :func:`~distrepro.training.models.build_model`, built fresh from exactly
    these, so the figures cannot change within a process; yet every job of every arm and seed counted them again
    (``distrepro plan qsr --scale paper``: 13 arms on one ResNet-152, 11 s of CPU, 10 of them this count). An
    error is raised each time, never kept."""
    return _count_model(name, num_classes, input_shape, json.loads(params))


def _count_model(
    name: str, num_classes: int, input_shape: tuple[int, int, int], params: dict[str, Any]
) -> tuple[float, int]:
    """Counted on the meta device (shapes only: no memory, no initialisation, no arithmetic, so a ViT-B/16 plan
    costs milliseconds, not a real forward and backward); a model that cannot be built or run there is counted on
    the CPU."""
    for device in ("meta", "cpu"):
        try:
            with torch.random.fork_rng(devices=[]), torch.device(device):
                probe = build_model(name, num_classes, input_shape, **params)
                return train_flops_per_sample(probe, input_shape), param_bytes(probe)
        except ConfigError:
            raise
        except Exception:
            if device == "cpu":
                raise
    raise AssertionError("unreachable")


def _check_batches_fit(
    cfg: RunConfig, bundle: DatasetBundle, batch_sizes: tuple[int, ...], source: str | Path | None
) -> None:
    """An empty training set, or a worker's batch larger than the whole training set (``batch_size:
    1000000000000`` would draw a trillion indices pass after pass), is refused before anything trains."""
    size = len(bundle.train)
    if size == 0:
        raise ConfigError(source, "dataset", f"dataset {cfg.dataset.name!r} has no training samples")
    largest = max(batch_sizes) if batch_sizes else 0
    if largest > size:
        raise ConfigError(
            source,
            "batch_size",
            f"a worker's batch of {largest} samples is larger than the whole training set ({size} samples)",
        )


def build_job(
    cfg: RunConfig,
    seed: int,
    source: str | Path | None = None,
    bundle: DatasetBundle | None = None,
    check_requires: bool = True,
) -> Job:
    """Resolve ``cfg`` for one seed index. ``bundle`` may be passed to share one dataset across jobs;
    ``check_requires=False`` resolves a method whose optional extra is absent (a plan, which runs nothing)."""
    method, params = resolve_method(cfg, source)
    missing = missing_requirements(method) if check_requires else []
    if missing:
        raise ConfigError(source, "method", f"{cfg.method} needs {', '.join(missing)}")
    profile = load_profile(cfg.profile, cfg.profile_variant)
    if bundle is None:
        try:
            dataset_plugin = get_dataset(cfg.dataset.name)
        except PluginError as exc:
            raise ConfigError(source, "dataset.name", str(exc)) from None
        bundle = build_dataset(dataset_plugin, cfg.dataset.params, cfg.dataset.root, _dataset_seed(cfg), source)
    batch_sizes = _batch_sizes(cfg, profile, source)
    _check_batches_fit(cfg, bundle, batch_sizes, source)
    check_optimizer(cfg, method.cls.accepts_optimizer, source)
    # Common random numbers: no method in the data/model seeds, so arms with the same seed index start from the same
    # model and see the same batches (as their allocations allow) and per-seed differences are the methods' own.
    seed_parts: tuple[object, ...] = (cfg.paper or "adhoc", profile.name, seed)
    method_seed_parts: tuple[object, ...] = (cfg.paper or "adhoc", cfg.method, profile.name, seed)
    proxy_flops, proxy_bytes = _probe(cfg, bundle, source)
    workload = get_workload(cfg.emulated_workload) if cfg.emulated_workload else None
    flops = workload.train_flops_per_sample if workload else proxy_flops
    scale = workload.param_bytes / proxy_bytes if workload else 1.0
    compute = ComputeModel(
        profile,
        workload.name if workload else None,
        flops,
        (*method_seed_parts, "compute"),
        method.cls.host_syncs,
        hardware_seed_parts=(*seed_parts, "hardware"),
    )
    job = Job(
        config=cfg,
        seed=seed,
        method=method,
        params=params,
        profile=profile,
        bundle=bundle,
        batch_sizes=batch_sizes,
        workload=workload,
        proxy_flops_per_sample=proxy_flops,
        proxy_param_bytes=proxy_bytes,
        compute=compute,
        cost=CommCostModel(profile, seed_parts=(*method_seed_parts, "link")),
        bytes_scale=scale,
        seed_parts=seed_parts,
        method_seed_parts=method_seed_parts,
        source=source,
    )
    try:  # bound now: a schedule the run cannot follow, or an allocation the method refuses, fails before any run
        job.lr_plan  # noqa: B018
    except ValueError as exc:  # the method's allocate refused these params on this cluster (ar_sgd: "needs GPUs")
        raise ConfigError(source, "method_params", f"{cfg.method} cannot allocate on {profile.name}: {exc}") from None
    return job

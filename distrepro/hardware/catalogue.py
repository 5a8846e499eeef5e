"""Published single-device measurements that profiles reference by name (``hardware_profiles/catalogue/*.yaml``).

A catalogue entry is one device running one workload at one precision, measured at one or more per-device batch
sizes by a source it cites (a benchmark table, a CSV at a commit). A device group of a profile points at it::

    compute:
      resnet50_in1k_224: {catalogue: rtx3090-resnet50-amp-timm, batch: 64}
      transformer_base_wmt14_195tok: {unmeasured: "no published single-A40 Transformer-base training run"}

and :func:`resolve_compute` turns the reference into the ``throughput_samples_per_s`` / ``step_overhead_ms`` the
engine charges, before the profile is validated. Why this replaces chains of ratios: a measured speed of the
device itself needs no ratio between two other GPUs' speeds in a third source.

**In batch.** Between two measured batches the step time is the line through both (the engine's own form
``t0 + b/peak``, :mod:`distrepro.hardware.calibrate`, exact at both points; where the throughput falls between
them, a line through both would need t0 < 0, and the fit through the origin is used instead). Outside the measured
batches, or with one batch only, the charge is extrapolated and the sensitivity range of the group's speed widens to
the physical bound: a throughput that saturates with the batch can be no higher at a smaller batch b than at the nearest
measured b0, and no lower than linear scaling from it, so the speed factor lies in ``[b/b0, 1]`` below the
measurements (``[1, b/b0]`` above them). No constant is fitted or invented for this.

**Unmeasured.** Where no measurement exists the group keeps its declared (derived) speed, its source says so and
its speed range widens to at least :data:`UNMEASURED_RANGE`.
"""

from __future__ import annotations

import copy
import functools
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from distrepro.errors import ConfigError, format_pydantic_error
from distrepro.hardware.calibrate import fit_step_curve
from distrepro.hardware.profile_parts import Source
from distrepro.safe_yaml import read_yaml_mapping

#: the speed factor's range where a profile declares a workload unmeasured on a device [E]: a speed carried over
#: from other GPUs through ratios has no measurement of this device to bound it; a factor 2 either way is the
#: spread of single-GPU ResNet-50 speeds between software stacks on one GPU model (NVIDIA DeepLearningExamples
#: PyTorch ResNet-50 v1.5 README @ 291f0d02, 1x A100 80GB AMP 2470 img/s vs TF32 938: precision and layout
#: alone move it 2.6x)
UNMEASURED_RANGE = (0.5, 2.0)

Positive = Annotated[float, Field(gt=0, allow_inf_nan=False)]


class Point(BaseModel):
    """One measurement: per-device batch and either samples per second or milliseconds per step."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    batch: int = Field(ge=1)
    samples_per_s: Positive | None = None
    step_ms: Positive | None = None

    @model_validator(mode="after")
    def _one_figure(self) -> Point:
        if (self.samples_per_s is None) == (self.step_ms is None):
            raise ValueError("give exactly one of samples_per_s and step_ms")
        return self

    @property
    def step_s(self) -> float:
        return self.step_ms / 1e3 if self.step_ms is not None else self.batch / float(self.samples_per_s or 1.0)


class Entry(BaseModel):
    """A device × workload × precision, measured at one or more batches, with its source."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    device: str = Field(min_length=1)
    workload: str = Field(min_length=1)
    precision: Literal["fp32", "tf32", "amp", "bf16"]
    points: list[Point] = Field(min_length=1)
    source: Source

    @model_validator(mode="after")
    def _distinct_batches(self) -> Entry:
        batches = [p.batch for p in self.points]
        if len(set(batches)) != len(batches):
            raise ValueError(f"points: a batch appears twice ({sorted(batches)}); give each batch once")
        return self


class _File(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    schema_version: Literal[1]
    entries: dict[str, Entry] = Field(min_length=1)


class Reference(BaseModel):
    """A device group's ``compute.<workload>``: a catalogue entry (at a batch), or why there is none."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    catalogue: str | None = Field(default=None, min_length=1)
    batch: int | None = Field(default=None, ge=1)
    unmeasured: str | None = Field(default=None, min_length=1)

    @model_validator(mode="after")
    def _one_kind(self) -> Reference:
        if (self.catalogue is None) == (self.unmeasured is None):
            raise ValueError("give either catalogue: NAME (and optionally batch) or unmeasured: REASON")
        if self.unmeasured is not None and self.batch is not None:
            raise ValueError("batch applies to a catalogue entry, not to an unmeasured workload")
        return self


def catalogue_files() -> list[Path]:
    """Every root's ``hardware_profiles/catalogue/*.yaml``, the shipped root first."""
    from distrepro.plugins.roots import roots

    return [p for root in roots() for p in sorted((root / "hardware_profiles" / "catalogue").glob("*.yaml"))]


@functools.lru_cache(maxsize=16)
def _read(path: Path, mtime_ns: int) -> dict[str, Entry]:
    data = read_yaml_mapping(path, "measurement catalogue")
    try:
        return dict(_File.model_validate(data).entries)
    except ValidationError as exc:
        raise format_pydantic_error(path, exc) from None


def load_catalogue(files: list[Path] | None = None) -> dict[str, tuple[Entry, Path]]:
    """All entries by name, each with its file; a name in two files is an error naming both."""
    out: dict[str, tuple[Entry, Path]] = {}
    for path in catalogue_files() if files is None else files:
        resolved = Path(path).resolve()
        for name, entry in _read(resolved, resolved.stat().st_mtime_ns).items():
            if name in out:
                raise ConfigError(resolved, f"entries.{name}", f"also defined in {out[name][1]}: rename one")
            out[name] = (entry, resolved)
    return out


def resolve_entry(entry: Entry, batch: int | None) -> tuple[float, float, tuple[float, float] | None, str]:
    """(t0 seconds, peak samples/s, speed bound or None, how) of ``entry`` charged at ``batch``.

    ``batch`` None: the fit over every point. Inside the measured batches: the line through the two around it.
    Outside, or one point: extrapolated, with the physical bound on the speed factor (module docstring).
    """
    points = sorted((p.batch, p.step_s) for p in entry.points)
    batches = [b for b, _ in points]
    if batch is None:
        fit = fit_step_curve(points)
        one = " (one batch: the throughput at it, t0 not separable)" if len(batches) == 1 else ""
        return fit.t0_s, fit.peak_samples_per_s, None, f"fit over batches {batches}{one}"
    if len(points) >= 2 and batches[0] <= batch <= batches[-1]:
        upper = next(i for i, b in enumerate(batches) if b >= batch)
        pair = points[max(upper - 1, 0) : max(upper - 1, 0) + 2]
        fit = fit_step_curve(pair)
        return fit.t0_s, fit.peak_samples_per_s, None, f"between measured batches {pair[0][0]} and {pair[1][0]}"
    if batch in batches:  # one measured batch, charged at it: exact there, whatever the split into t0 and peak
        fit = fit_step_curve([p for p in points if p[0] == batch])
        return fit.t0_s, fit.peak_samples_per_s, None, f"at the measured batch {batch} (one batch: t0 not separable)"
    nearest = batches[0] if batch < batches[0] else batches[-1]
    fit = fit_step_curve(points[:2] if batch < batches[0] else points[-2:])
    ratio = batch / nearest
    bound = (min(ratio, 1.0), max(ratio, 1.0))
    how = f"extrapolated from batch {nearest} to {batch} (measured {batches})"
    return fit.t0_s, fit.peak_samples_per_s, bound, how


def _widen(group: dict[str, Any], low: float, high: float, reason: str) -> None:
    ranges = dict(group.get("ranges") or {})
    speed = dict(ranges.get("speed") or {"name": f"catalogue.{group.get('name', 'device')}.speed", "low": 1.0,
                                          "high": 1.0, "reason": ""})  # fmt: skip
    speed["low"] = min(float(speed["low"]), low)
    speed["high"] = max(float(speed["high"]), high)
    speed["reason"] = "; ".join(part for part in (str(speed.get("reason", "")), reason) if part)
    ranges["speed"] = speed
    group["ranges"] = ranges


def _resolve_group(group: dict[str, Any], where: str, origin: Path | str, entries: Any) -> dict[str, Any]:
    group = copy.deepcopy(group)
    compute = group.pop("compute")
    if not isinstance(compute, dict):
        raise ConfigError(origin, f"{where}.compute", "expected a mapping of workload -> {catalogue: NAME, batch: B}")
    notes: list[str] = []
    for workload, raw in compute.items():
        field = f"{where}.compute.{workload}"
        try:
            ref = Reference.model_validate(raw)
        except ValidationError as exc:
            inner = format_pydantic_error(None, exc)
            raise ConfigError(origin, field, inner.message) from None
        if ref.unmeasured is not None:
            if workload not in (group.get("throughput_samples_per_s") or {}):
                raise ConfigError(origin, field, "unmeasured: declare the derived throughput_samples_per_s for it")
            low, high = UNMEASURED_RANGE
            _widen(group, low, high, f"[E] {workload}: no single-device measurement ({ref.unmeasured})")
            notes.append(f"compute {workload}: no published single-device measurement ({ref.unmeasured}) [E]")
            continue
        catalogue = entries() if callable(entries) else entries
        if ref.catalogue not in catalogue:
            known = ", ".join(sorted(catalogue)) or "none"
            raise ConfigError(origin, f"{field}.catalogue", f"no catalogue entry '{ref.catalogue}'; known: {known}")
        entry, path = catalogue[ref.catalogue]
        if entry.workload != workload:
            raise ConfigError(
                origin, f"{field}.catalogue", f"'{ref.catalogue}' measures {entry.workload}, not {workload}"
            )
        batch = ref.batch if ref.batch is not None else group.get("batch_size")
        t0, peak, bound, how = resolve_entry(entry, batch)
        group.setdefault("throughput_samples_per_s", {})[workload] = round(peak, 4)
        overheads = group.setdefault("step_overhead_ms", {})
        if t0 > 0:
            overheads[workload] = round(t0 * 1e3, 4)
        else:
            overheads.pop(workload, None)
        if not overheads:
            group.pop("step_overhead_ms")
        if bound is not None:
            _widen(group, bound[0], bound[1], f"[D] {workload} {how}: saturating throughput bounds the speed")
        notes.append(
            f"compute {workload}: catalogue '{ref.catalogue}' ({entry.device}, {entry.precision}, {path.name}), {how}: "
            f"t0 {t0 * 1e3:.4g} ms, peak {peak:.4g} samples/s; {entry.source}"
        )
    group["source"] = "; ".join([str(group.get("source", "")), *notes])
    return group


def resolve_compute(data: dict[str, Any], origin: Path | str) -> dict[str, Any]:
    """``data`` (a profile as read from YAML) with every device group's ``compute`` resolved; unchanged without one.

    A group shared through a YAML anchor is resolved once and shared again.
    """
    nodes = data.get("nodes")
    if not isinstance(nodes, list) or not any(
        isinstance(g, dict) and "compute" in g for n in nodes if isinstance(n, dict) for g in (n.get("devices") or [])
    ):
        return data
    entries = functools.cache(load_catalogue)
    done: dict[int, dict[str, Any]] = {}
    out = dict(data)
    out["nodes"] = []
    for i, node in enumerate(nodes):
        if not isinstance(node, dict) or not isinstance(node.get("devices"), list):
            out["nodes"].append(node)
            continue
        groups = []
        for j, group in enumerate(node["devices"]):
            if isinstance(group, dict) and "compute" in group:
                if id(group) not in done:
                    done[id(group)] = _resolve_group(group, f"nodes[{i}].devices[{j}]", origin, entries)
                group = done[id(group)]
            groups.append(group)
        out["nodes"].append({**node, "devices": groups})
    return out

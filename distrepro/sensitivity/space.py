"""The uncertain figures of a reproduction, the settings to try, and a profile with a setting applied.

Variables come from three places: ranged profile figures (:func:`distrepro.hardware.profile_ranges.ranged_figures`)
of every profile the re-timed runs used, the framework figures those profiles are charged with
(:func:`framework_figures`: DDP's per-tensor launch cost and bucket copies on a GPU cluster, the contention of
collectives with backward on an NCCL one, over :data:`distrepro.timing.framework.RANGES` unless the profile's
``framework:`` block ranges them), and ``setup.sensitivity.assumptions`` of the paper. A
variable is identified by name, so a figure that appears in several profiles (the 10 GbE link of
every Chao template) is one variable and moves in all of them at once; ranges sharing a name must
agree, or the sweep would have no single value to report.

Designs are in quantiles of each range (0 = low, 1 = high, in the range's spacing):

* :func:`latin_hypercube`: n settings, each variable's range cut into n equal strata with exactly
  one setting per stratum (McKay, Beckman & Conover, Technometrics 21(2), 1979), strata paired at
  random with a seeded generator, so the same seed gives the same design on every machine;
* one-at-a-time scans (tornado, flip points): one variable moves, the others stay central.

A categorical figure (a profile's ``collective_algorithm``, :class:`~distrepro.hardware.profile_ranges.ChoiceRange`)
is a variable whose value is the index of a choice: the design gives each choice an equal share, a scan visits every
choice once, and :meth:`Variable.describe` names the choice.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

from distrepro.errors import ConfigError
from distrepro.hardware.profile_ranges import ChoiceRange, FigureRange, ranged_figures
from distrepro.hardware.profiles import HardwareProfile
from distrepro.timing import framework

_UNITS = {
    "latency_us": "µs",
    "bandwidth_gbytes_per_s": "GB/s",
    "speed": "× declared",
    "overhead": "× declared",
    "launch_us": "µs",
    "bucket_passes": "bytes per gradient byte",
    "contention": "fraction slower while overlapped",
}

#: the default range of each framework figure (:data:`distrepro.timing.framework.RANGES`, in the profile's units)
_FRAMEWORK_RANGES = {
    "launch_us": FigureRange(
        low=framework.RANGES["LAUNCH_S"][0] * 1e6,
        high=framework.RANGES["LAUNCH_S"][1] * 1e6,
        reason="PyTorch reducer's two kernels per gradient tensor, 1-5 µs each (distrepro/timing/framework.py)",
    ),
    "bucket_passes": FigureRange(
        low=framework.RANGES["BUCKET_PASSES"][0],
        high=framework.RANGES["BUCKET_PASSES"][1],
        spacing="linear",
        reason="PyTorch's reducer, division fused into the copy in (4), to a divide pass of its own (apex, a hook: 6)",
    ),
    "contention": FigureRange(
        low=framework.RANGES["CONTENTION"][0],
        high=framework.RANGES["CONTENTION"][1],
        spacing="linear",
        reason="none to the 40 % compute slowdown measured under overlapped collectives (arXiv:2507.03114)",
    ),
}


@dataclass(frozen=True)
class Variable:
    """One swept figure: its range, the value the runs used, and where it appears."""

    name: str
    range: FigureRange
    central: float
    kind: Literal["profile", "assumption"]
    places: tuple[str, ...] = ()
    unit: str = ""

    @property
    def low(self) -> float:
        return self.range.low

    @property
    def high(self) -> float:
        return self.range.high

    def at(self, quantile: float) -> float:
        return self.range.at(quantile)

    @property
    def central_quantile(self) -> float:
        return self.range.quantile(self.central)

    @property
    def choices(self) -> tuple[str, ...]:
        """The choices of a categorical variable (``()`` for a numeric one)."""
        return self.range.choices if isinstance(self.range, ChoiceRange) else ()

    def grid(self, n: int) -> list[float]:
        """``n`` values evenly spread over the range (a categorical variable: each choice once)."""
        if self.choices:
            return [float(i) for i in range(len(self.choices))]
        return [self.at(q) for q in np.linspace(0.0, 1.0, n)]

    def describe(self, value: float) -> str:
        """``0.41 GB/s (3.3 Gbit/s)``: a value as a reader would say it (a categorical one: the choice)."""
        if isinstance(self.range, ChoiceRange):
            return self.range.label(value)
        text = f"{value:.3g} {self.unit}".strip()
        if self.name.endswith("bandwidth_gbytes_per_s"):
            text += f" ({8 * value:.3g} Gbit/s)"
        return text


@dataclass
class Space:
    """The variables of a sweep, in a fixed order (sorted by name)."""

    variables: list[Variable] = field(default_factory=list)

    @property
    def names(self) -> list[str]:
        return [v.name for v in self.variables]

    def __getitem__(self, name: str) -> Variable:
        return next(v for v in self.variables if v.name == name)

    def central(self) -> dict[str, float]:
        return {v.name: v.central for v in self.variables}

    def setting(self, quantiles: Iterable[float]) -> dict[str, float]:
        """Values for one row of quantiles (same order as :attr:`variables`)."""
        return {v.name: v.at(q) for v, q in zip(self.variables, quantiles, strict=True)}


def _merge(found: dict[str, Variable], var: Variable, source: str) -> None:
    old = found.get(var.name)
    if old is None:
        found[var.name] = var
        return
    same = (old.range.low, old.range.high, old.range.spacing, old.choices) == (
        var.range.low,
        var.range.high,
        var.range.spacing,
        var.choices,
    )
    if not same or not math.isclose(old.central, var.central, rel_tol=1e-12):
        raise ConfigError(
            source,
            var.places[0] if var.places else None,
            f"sensitivity variable '{var.name}' has [{var.low:g}, {var.high:g}] around {var.central:g} here but "
            f"[{old.low:g}, {old.high:g}] around {old.central:g} in {old.places[0] if old.places else '?'}: "
            "ranges sharing a name must agree",
        )
    found[var.name] = Variable(var.name, old.range, old.central, old.kind, old.places + var.places, old.unit)


def framework_figures(profile: HardwareProfile) -> list[tuple[str, str, float, FigureRange]]:
    """(variable name, field path, central value, range) of the framework figures ``profile`` is charged with:
    ``launch_us`` and ``bucket_passes`` where a GPU's memory bandwidth is known (elsewhere DDP's reducer is not
    charged), ``contention`` on an NCCL cluster unless pinned to 0 without a range (the acid profiles). Named
    ``framework.<figure>`` unless the profile's range names it otherwise."""
    block = profile.framework
    declared = block.ranges if block is not None else {}
    figures = framework.costs(profile)
    gpus = any(g.kind == "gpu" and framework.memory_bandwidth(g.name) for n in profile.nodes for g in n.devices)
    central = {"launch_us": round(figures.launch_s * 1e6, 9), "bucket_passes": figures.bucket_passes}
    wanted = ["launch_us", "bucket_passes"] if gpus else []
    if figures.contention > 0 or "contention" in declared:
        wanted.append("contention")
        central["contention"] = figures.contention
    out = []
    for key in wanted:
        rng = declared.get(key, _FRAMEWORK_RANGES[key])
        out.append((rng.name or f"framework.{key}", f"framework.{key}", central[key], rng))
    return out


def profile_variables(profiles: Iterable[HardwareProfile]) -> dict[str, Variable]:
    """Every ranged figure of ``profiles`` and the framework figures they are charged with, one variable per name."""
    found: dict[str, Variable] = {}
    for prof in profiles:
        for name, path, central, rng in [*ranged_figures(prof), *framework_figures(prof)]:
            unit = _UNITS.get(path.rsplit(".", 1)[-1], "")
            var = Variable(name, rng, central, "profile", (f"{prof.name}: {path}",), unit)
            _merge(found, var, prof.origin)
    return found


def build_space(profile_vars: Mapping[str, Variable], assumption_vars: Iterable[Variable]) -> Space:
    found = dict(profile_vars)
    for var in assumption_vars:
        _merge(found, var, var.places[0] if var.places else "paper.yaml")
    return Space(sorted(found.values(), key=lambda v: (v.kind != "assumption", v.name)))


def latin_hypercube(n: int, d: int, seed: int) -> np.ndarray:
    """``(n, d)`` quantiles in [0, 1): column j has one value in each stratum [k/n, (k+1)/n)."""
    if n < 1 or d < 0:
        raise ValueError(f"latin_hypercube needs n >= 1 and d >= 0, got n={n}, d={d}")
    rng = np.random.default_rng(seed)
    strata = np.stack([rng.permutation(n) for _ in range(d)], axis=1) if d else np.zeros((n, 0))
    return (strata + rng.random((n, d))) / n


def oat_quantiles(var: Variable, points: int) -> list[float]:
    """``points`` evenly spaced quantiles from 0 to 1, plus the central value's, sorted (a categorical variable:
    one quantile per choice)."""
    if var.choices:
        return [var.range.quantile(i) for i in range(len(var.choices))]
    grid = {round(float(q), 12) for q in np.linspace(0.0, 1.0, points)}
    grid.add(round(min(1.0, max(0.0, var.central_quantile)), 12))
    return sorted(grid)


def scale_host_costs(group: dict[str, Any], factor: float) -> None:
    """A device group's host costs times ``factor``, in place: ``step_floor_ms`` and ``host_sync_ms`` (the syncs'
    drain and refill come from the same per-op host time as the floor, so the two move together)."""
    group["step_floor_ms"] = {w: v * factor for w, v in group.get("step_floor_ms", {}).items()}
    syncs = group.get("host_sync_ms", {})
    group["host_sync_ms"] = {w: {loop: v * factor for loop, v in by.items()} for w, by in syncs.items()}


def apply_to_profile(profile: HardwareProfile, values: Mapping[str, float]) -> HardwareProfile:
    """A copy of ``profile`` with each ranged figure set to its variable's value in ``values``
    (a device ``speed`` multiplies every declared speed of the group, a choice index picks the choice); figures
    not named keep theirs."""
    data: dict[str, Any] = profile.model_dump()
    for field_name, choices in profile.ranges.items():
        variable = choices.name or field_name
        if variable in values:
            data[field_name] = choices.label(min(choices.high, max(choices.low, float(values[variable]))))

    def set_link(link: dict[str, Any], prefix: str) -> None:
        for key, rng in link["ranges"].items():
            name = rng["name"] or f"{prefix}.{key}"
            if name in values:
                link[key] = min(rng["high"], max(rng["low"], float(values[name])))

    for key in ("intra_node", "inter_node", "server"):
        if data["network"].get(key) is not None:
            set_link(data["network"][key], f"network.{key}")
    for node in data["nodes"]:
        if node.get("nic") is not None:  # a node's shared NIC moves with the variable its range names
            set_link(node["nic"], f"{node['name']}.nic")
        for group in node["devices"]:
            if group["nic"] is not None:
                set_link(group["nic"], f"{group['name']}.nic")
            rng = group["ranges"].get("speed")
            name = (rng["name"] or f"{group['name']}.speed") if rng else None
            if name is not None and name in values:
                factor = float(values[name])
                speeds = group["throughput_samples_per_s"]
                group["throughput_samples_per_s"] = {w: v * factor for w, v in speeds.items()}
                if group["effective_flops_per_s"] is not None:
                    group["effective_flops_per_s"] *= factor
            rng = group["ranges"].get("overhead")
            name = (rng["name"] or f"{group['name']}.overhead") if rng else None
            if name is not None and name in values:
                factor = float(values[name])
                group["step_overhead_ms"] = {w: v * factor for w, v in group.get("step_overhead_ms", {}).items()}
                scale_host_costs(group, factor)  # every fixed cost moves with the factor
    for name, path, _central, rng in framework_figures(profile):
        if name in values:
            block = data.get("framework") or {"source": "[E] set by a sensitivity setting"}
            block[path.split(".", 1)[1]] = min(rng.high, max(rng.low, float(values[name])))
            data["framework"] = block
    new = HardwareProfile.model_validate(data)
    new._source_path = profile.source_path
    new._variant = profile.variant
    return new

"""Plausible ranges on estimated profile figures: the uncertainty a sensitivity sweep propagates.

A profile figure graded ``[E]`` (an estimate: a CPU nobody named, a network no paper states) is a
central value, not a fact. A verdict that holds only at that value is fragile, so each estimate
declares the interval it could plausibly take, with the reason for the bounds ("1 GbE to 10 GbE"),
and ``distrepro ... --sensitivity`` sweeps it (:mod:`distrepro.sensitivity`).

Where ranges live (``ranges:`` beside the figures they qualify):

* a **link** (``network.*`` or a device's ``nic``): ``latency_us`` and/or ``bandwidth_gbytes_per_s``;
  the range must contain the link's value;
* a **device group**: ``speed``, a *factor* on every declared speed of the group (each
  ``throughput_samples_per_s`` entry and ``effective_flops_per_s``) because they come from one
  estimate of how fast the device is; the range must contain 1.

Ranges that share a ``name`` are one sweep variable (they move together, at the same quantile of
their range): e.g. every CPU box's NIC in one lab, or an emulated half-speed card that is by
definition a fixed fraction of the full-speed one. The default name is the figure's place
(``cpu_4core.speed``, ``network.inter_node.bandwidth_gbytes_per_s``, ``cpu_4core.nic.latency_us``).

Policy for an ``[E]`` figure without a range: loading does **not** fail (user and test profiles
stay loadable), :func:`unranged_estimates` names it, a sensitivity sweep holds it at its central
value and says so in the report, and ``tests/test_profile_ranges.py`` requires every shipped
profile to range all of its estimates.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator, Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

LINK_FIGURES = ("latency_us", "bandwidth_gbytes_per_s")
DEVICE_FIGURES = ("speed", "overhead")
_ESTIMATE = re.compile(r"\[(?:[MDESL]/)*E(?:/[MDESL])*\]")


class FigureRange(BaseModel):
    """``[low, high]`` of one figure, why those bounds, and how to sample between them."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    low: float = Field(ge=0, allow_inf_nan=False)
    high: float = Field(gt=0, allow_inf_nan=False)
    reason: str = Field(min_length=1)
    #: sweep variable this range belongs to; ranges with one name move together
    name: str | None = Field(default=None, min_length=1)
    #: ``log``: uniform in log space (a bandwidth from 1 to 10 GbE is as likely below 3.2 GbE as
    #: above), the default for the positive, multiplicative figures here; ``linear`` otherwise
    spacing: Literal["log", "linear"] = "log"

    @model_validator(mode="after")
    def _ordered(self) -> FigureRange:
        if self.low > self.high:
            raise ValueError(f"low {self.low:g} > high {self.high:g}")
        if self.spacing == "log" and self.low <= 0:
            raise ValueError("spacing: log needs low > 0 (use spacing: linear for a range from 0)")
        if not self.reason.strip():
            raise ValueError("reason must say where the bounds come from")
        return self

    def contains(self, value: float) -> bool:
        return self.low * (1 - 1e-12) <= value <= self.high * (1 + 1e-12)

    def at(self, quantile: float) -> float:
        """The value at ``quantile`` in [0, 1] of the range, in its spacing."""
        q = min(1.0, max(0.0, float(quantile)))
        if self.spacing == "log":
            return float(math.exp(math.log(self.low) + q * (math.log(self.high) - math.log(self.low))))
        return self.low + q * (self.high - self.low)

    def quantile(self, value: float) -> float:
        """Inverse of :meth:`at` (0 for a degenerate range)."""
        if self.high == self.low:
            return 0.0
        if self.spacing == "log":
            return (math.log(value) - math.log(self.low)) / (math.log(self.high) - math.log(self.low))
        return (value - self.low) / (self.high - self.low)


def check_link_ranges(values: Mapping[str, float], ranges: Mapping[str, FigureRange]) -> None:
    """Each range names a link figure and contains its value (called by the Link validator)."""
    for key, rng in ranges.items():
        if key not in LINK_FIGURES:
            raise ValueError(f"ranges.{key}: a link ranges only {', '.join(LINK_FIGURES)}")
        if not rng.contains(values[key]):
            raise ValueError(f"ranges.{key}: [{rng.low:g}, {rng.high:g}] does not contain the value {values[key]:g}")


def check_device_ranges(ranges: Mapping[str, FigureRange]) -> None:
    """A device group ranges only ``speed`` (a factor on its declared large-batch speeds) and ``overhead`` (a factor
    on its declared step overheads); both ranges contain 1 (the declared value)."""
    for key, rng in ranges.items():
        if key not in DEVICE_FIGURES:
            raise ValueError(
                f"ranges.{key}: a device group ranges only 'speed' (a factor on its declared speeds) and "
                "'overhead' (a factor on its step_overhead_ms)"
            )
        if not rng.contains(1.0):
            raise ValueError(f"ranges.{key}: [{rng.low:g}, {rng.high:g}] must contain 1 (the declared value)")


def is_estimate(source: str) -> bool:
    """True when a ``source`` grades some of its figures ``[E]`` (alone or combined, e.g. ``[L/E]``)."""
    return bool(_ESTIMATE.search(source))


def _links(profile: Any) -> Iterator[tuple[str, str, Any]]:
    """(default variable prefix, field path, link) for every link the loaded network and NICs hold."""
    net = profile.network
    for key in ("intra_node", "inter_node", "server"):
        link = getattr(net, key)
        if link is not None:
            yield f"network.{key}", f"network.{key}", link
    seen: set[str] = set()
    for i, node in enumerate(profile.nodes):
        for j, group in enumerate(node.devices):
            if group.nic is not None and group.name not in seen:
                seen.add(group.name)
                yield f"{group.name}.nic", f"nodes[{i}].devices[{j}].nic", group.nic


def _groups(profile: Any) -> Iterator[tuple[str, Any]]:
    seen: set[str] = set()
    for i, node in enumerate(profile.nodes):
        for j, group in enumerate(node.devices):
            if group.name not in seen:  # a group repeated on several nodes (YAML anchor) is one device
                seen.add(group.name)
                yield f"nodes[{i}].devices[{j}]", group


def unranged_estimates(profile: Any) -> list[str]:
    """Fields of ``[E]``-graded links and device groups that declare no range (see the module policy)."""
    out = []
    for _, path, link in _links(profile):
        if is_estimate(link.source):
            out += [f"{path}.{f}" for f in LINK_FIGURES if f not in link.ranges]
    for path, group in _groups(profile):
        if is_estimate(group.source) and "speed" not in group.ranges:
            out.append(f"{path}.speed")
        if is_estimate(group.source) and group.step_overhead_ms and "overhead" not in group.ranges:
            out.append(f"{path}.overhead")
    return out


def ranged_figures(profile: Any) -> Iterator[tuple[str, str, float, FigureRange]]:
    """(variable name, field path, central value, range) of every ranged figure of ``profile``'s
    loaded network and devices; a device ``speed`` or ``overhead`` factor has central value 1."""
    for prefix, path, link in _links(profile):
        for key, rng in link.ranges.items():
            yield rng.name or f"{prefix}.{key}", f"{path}.{key}", float(getattr(link, key)), rng
    for path, group in _groups(profile):
        for key, rng in group.ranges.items():
            yield rng.name or f"{group.name}.{key}", f"{path}.{key}", 1.0, rng

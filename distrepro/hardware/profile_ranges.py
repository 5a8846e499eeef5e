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
  estimate of how fast the device is, and ``overhead``, a factor on its ``step_overhead_ms``; each range
  must contain 1;
* the **profile** itself: ``collective_algorithm``, a :class:`ChoiceRange` of the algorithms a cluster
  could plausibly run (``[auto, hierarchical]``: NCCL's rule, or a two-level all-reduce), which must
  contain the declared one. A choice is not a number, so a sweep moves it through the choices'
  indices (one equal share of the design each).

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
PROFILE_CHOICES = ("collective_algorithm",)
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


class ChoiceRange(FigureRange):
    """Plausible *choices* of a categorical figure (``collective_algorithm``), as a range over their indices.

    The sweep treats every variable as a range sampled by quantile; a choice variable's value is the index of a
    choice (0 .. n−1), quantile q picking choice ``⌊q·n⌋``, so a Latin hypercube gives each choice an equal share
    of the settings. ``low``/``high`` are implied (0 and n−1): a file gives only ``choices``, ``reason`` and ``name``
    (a dumped range, which carries the implied values, reloads)."""

    choices: tuple[str, ...] = Field(min_length=2)
    spacing: Literal["log", "linear"] = "linear"

    @model_validator(mode="before")
    @classmethod
    def _implied_bounds(cls, data: Any) -> Any:
        """Fill ``low``, ``high`` and ``spacing`` from the choices; a dumped range (which carries them) reloads."""
        choices = data.get("choices") if isinstance(data, Mapping) else None
        if not isinstance(choices, list | tuple):
            return data
        if len(set(choices)) != len(choices):
            raise ValueError(f"choices must be distinct, got {list(choices)}")
        implied = {"low": 0, "high": max(len(choices) - 1, 0), "spacing": "linear"}
        given = {k: data[k] for k in implied if k in data}
        if any(v != implied[k] for k, v in given.items()):
            raise ValueError(f"{', '.join(given)}: a choice range gives only choices, reason and name")
        return {**data, **implied}

    def contains(self, value: float) -> bool:
        return float(value).is_integer() and 0 <= value < len(self.choices)

    def at(self, quantile: float) -> float:
        """Index of the choice whose equal share of [0, 1] holds ``quantile``."""
        q = min(1.0, max(0.0, float(quantile)))
        return float(min(len(self.choices) - 1, int(q * len(self.choices))))

    def quantile(self, value: float) -> float:
        """The middle of the choice's share (so that :meth:`at` of it gives the choice back)."""
        return (round(value) + 0.5) / len(self.choices)

    def label(self, value: float) -> str:
        return self.choices[round(value)]

    def index(self, choice: str) -> float:
        return float(self.choices.index(choice))


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
                "'overhead' (a factor on its step_overhead_ms and step_floor_ms)"
            )
        if not rng.contains(1.0):
            raise ValueError(f"ranges.{key}: [{rng.low:g}, {rng.high:g}] must contain 1 (the declared value)")


def check_profile_ranges(
    values: Mapping[str, str], ranges: Mapping[str, ChoiceRange], allowed: Mapping[str, tuple[str, ...]]
) -> None:
    """A profile ranges only its categorical figures (``collective_algorithm``); each choice is one the field
    accepts and the declared value is among the choices (called by the profile validator)."""
    for key, rng in ranges.items():
        if key not in PROFILE_CHOICES:
            raise ValueError(f"ranges.{key}: a profile ranges only {', '.join(PROFILE_CHOICES)}")
        bad = [c for c in rng.choices if c not in allowed[key]]
        if bad:
            raise ValueError(f"ranges.{key}: unknown choice(s) {bad}; known: {', '.join(allowed[key])}")
        if values[key] not in rng.choices:
            raise ValueError(f"ranges.{key}: choices {list(rng.choices)} do not contain the value {values[key]!r}")


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
    """Fields of ``[E]``-graded links and device groups that declare no range (see the module policy), and every
    declared ``step_overhead_ms`` without an ``overhead`` range."""
    out = []
    for _, path, link in _links(profile):
        if is_estimate(link.source):
            out += [f"{path}.{f}" for f in LINK_FIGURES if f not in link.ranges]
    for path, group in _groups(profile):
        if is_estimate(group.source) and "speed" not in group.ranges:
            out.append(f"{path}.speed")
        # a fixed step cost is the intercept of a line through measured points (or a transfer of one): an
        # extrapolation whatever the grade of the speeds beside it, so it always needs its range
        if (group.step_overhead_ms or group.step_floor_ms) and "overhead" not in group.ranges:
            out.append(f"{path}.overhead")
    return out


def ranged_figures(profile: Any) -> Iterator[tuple[str, str, float, FigureRange]]:
    """(variable name, field path, central value, range) of every ranged figure of ``profile``'s
    loaded network and devices; a device ``speed`` or ``overhead`` factor has central value 1; a profile choice
    (``collective_algorithm``) the index of the declared choice."""
    for key, rng in getattr(profile, "ranges", {}).items():
        yield rng.name or key, key, rng.index(getattr(profile, key)), rng
    for prefix, path, link in _links(profile):
        for key, rng in link.ranges.items():
            yield rng.name or f"{prefix}.{key}", f"{path}.{key}", float(getattr(link, key)), rng
    for path, group in _groups(profile):
        for key, rng in group.ranges.items():
            yield rng.name or f"{group.name}.{key}", f"{path}.{key}", 1.0, rng

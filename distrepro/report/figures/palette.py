"""One colour per arm, the same in every figure of a report.

A report can hold 2 to 30 arms (Chao's reproduction has 16). A categorical palette of 10 colours
repeats from the 11th arm on, so two arms would share a colour. :func:`distinct_colors` keeps
seaborn's colour-blind palette for the first ten arms (the common case looks as before) and
extends it greedily, glasbey-style: each further colour is the candidate farthest, in CIELAB,
from every colour already chosen, among mid-lightness, clearly chromatic candidates (no near
white, near black or grey, which would vanish against the background or read as "idle").

:class:`ArmStyle` is computed once per report (:func:`arm_style`) and handed to every figure
function, so an arm has one colour and one position everywhere; seaborn's ``hue`` would instead
colour by order of appearance in each table, which is how two figures came to swap colours.

Colour alone does not tell every arm apart: the palette's blue and sky blue read as one hue to many
readers (and to everyone in a greyscale print), and curves that overlap hide each other's colour. So
each arm also has a line style and a marker (:data:`LINESTYLES`, :data:`MARKERS`), cycled in report
order: neighbours in the order, which a figure draws side by side, never share either, and no two
arms share a (colour, line style) pair since no two share a colour.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import seaborn as sns
from matplotlib.colors import to_hex


def _lab(rgb: np.ndarray) -> np.ndarray:
    """sRGB in [0, 1] (n × 3) → CIELAB (D65)."""
    lin = np.where(rgb <= 0.04045, rgb / 12.92, ((rgb + 0.055) / 1.055) ** 2.4)
    xyz = lin @ np.array([[0.4124, 0.2126, 0.0193], [0.3576, 0.7152, 0.1192], [0.1805, 0.0722, 0.9505]])
    xyz = xyz / np.array([0.95047, 1.0, 1.08883])
    f = np.where(xyz > (6 / 29) ** 3, np.cbrt(xyz), xyz / (3 * (6 / 29) ** 2) + 4 / 29)
    return np.stack([116 * f[:, 1] - 16, 500 * (f[:, 0] - f[:, 1]), 200 * (f[:, 1] - f[:, 2])], axis=1)


@functools.cache
def distinct_colors(n: int) -> tuple[str, ...]:
    """``n`` colours (hex), pairwise far apart in CIELAB; the first ten are seaborn's colour-blind palette."""
    base = [to_hex(c) for c in sns.color_palette("colorblind", 10)]
    if n <= len(base):
        return tuple(base[:n])
    steps = np.linspace(0.0, 1.0, 18)
    cand = np.stack(np.meshgrid(steps, steps, steps, indexing="ij"), -1).reshape(-1, 3)
    lab = _lab(cand)
    chroma = np.hypot(lab[:, 1], lab[:, 2])
    keep = (lab[:, 0] > 30) & (lab[:, 0] < 82) & (chroma > 25)
    cand, lab = cand[keep], lab[keep]
    chosen = [_lab(np.array([[int(h[i : i + 2], 16) / 255 for i in (1, 3, 5)]]))[0] for h in base]
    nearest = np.min(np.linalg.norm(lab[:, None, :] - np.array(chosen)[None], axis=2), axis=1)
    out = list(base)
    while len(out) < n:
        k = int(np.argmax(nearest))
        out.append(to_hex(cand[k]))
        nearest = np.minimum(nearest, np.linalg.norm(lab - lab[k], axis=1))
    return tuple(out)


#: line styles and markers, cycled in report order; lengths 4 and 7 are coprime, so a (style, marker) pair
#: repeats only every 28 arms
LINESTYLES = ("-", "--", "-.", ":")
MARKERS = ("o", "s", "^", "D", "v", "P", "X")


@dataclass(frozen=True)
class ArmStyle:
    """Order and colour of every arm in a report; ``groups`` (arm → e.g. its profile) lets a figure
    facet arms that belong together; empty when they all share one group."""

    order: tuple[str, ...]
    colors: Mapping[str, str]
    groups: Mapping[str, str] = field(default_factory=dict)

    def color(self, arm: str) -> str:
        return self.colors[arm]

    def linestyle(self, arm: str) -> str:
        """The arm's line style: ``-``, ``--``, ``-.`` or ``:`` (an arm unknown to the style: solid)."""
        return LINESTYLES[self.order.index(arm) % len(LINESTYLES)] if arm in self.order else "-"

    def marker(self, arm: str) -> str:
        """The arm's marker (an arm unknown to the style: a dot)."""
        return MARKERS[self.order.index(arm) % len(MARKERS)] if arm in self.order else "o"

    def present(self, arms: Iterable[str]) -> list[str]:
        """``arms`` in report order (arms unknown to the style go last, sorted)."""
        wanted = set(arms)
        return [a for a in self.order if a in wanted] + sorted(wanted - set(self.order))


def arm_style(order: Sequence[str], groups: Mapping[str, str] | None = None) -> ArmStyle:
    """The style for ``order`` (each arm once, in the order figures list them)."""
    order = tuple(dict.fromkeys(order))
    groups = dict(groups or {})
    if len(set(groups.values())) <= 1:
        groups = {}
    return ArmStyle(order, dict(zip(order, distinct_colors(len(order)), strict=True)), groups)

"""Charges on a noisy link over lanes: the noise-free charge per setting times the factor each seed draws.

Why: with link noise (``profile.noise.link_cv``, C-ADP's and A²CiD²'s clusters) every call is multiplied by its own
lognormal factor, so :mod:`distrepro.sensitivity.lanes` could not reuse a charge and asked each lane's cost model for
every call, one Python charge per setting, and the report left such runs to the scalar replay. Yet a factor is a
function of the run's link seed, the profile's ``link_cv`` and how many calls of that pattern the group made before
(:meth:`distrepro.timing.timemodel.CommCostModel._noisy`), never of the swept figures; and the lanes make the same
calls in the same order (they follow one control path). So the factor is drawn once per distinct (seed, ``link_cv``)
by a cost model that records it (:class:`_Factors`: the frozen draw itself, called with unit seconds), the
noise-free charge is worked out once per setting, and each lane's charge is their product: the one multiplication
the scalar replay makes (``seconds * lognormal(σ, u)``), so every lane holds bit for bit what it would hold alone.

A draw is skipped where a call's charge is zero; lanes where it is zero in some settings only would count their
calls apart, and a charge that draws twice could not be split this way: both raise :class:`Diverged`.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import Any

import numpy as np

from distrepro.job.resolve import Job
from distrepro.sensitivity.lane_contention import Diverged, Lanes
from distrepro.sensitivity.probe import Call
from distrepro.timing import charges
from distrepro.timing.timemodel import CommCostModel


def distinct(keys: Sequence[Hashable]) -> tuple[list[int], np.ndarray]:
    """The first lane of each distinct key, and each lane's index among those."""
    index: dict[Hashable, int] = {}
    firsts: list[int] = []
    which = []
    for lane, key in enumerate(keys):
        if key not in index:
            index[key] = len(firsts)
            firsts.append(lane)
        which.append(index[key])
    return firsts, np.array(which, dtype=np.intp)


class _Factors(CommCostModel):
    """A cost model that draws each call's link-noise factor as its noisy model would, records it in ``factors``
    and charges the noise-free seconds: the factor is the frozen draw applied to one second (``1.0 * f`` is ``f``)."""

    def __init__(self, cost: CommCostModel) -> None:
        super().__init__(cost.profile, cost.bytes_scale, cost.seed_parts)
        self.load_state_dict(cost.state_dict())  # the draws counted so far, as the lane's own model
        self.factors: list[float] = []

    def _noisy(self, pattern: str, group: tuple[int, ...], seconds: float, nbytes: float) -> float:
        if seconds != 0:  # a zero charge draws nothing
            self.factors.append(super()._noisy(pattern, group, 1.0, nbytes))
        return seconds


class NoisyCharges:
    """Each call's charge on every lane of a noisy link, in the lanes' call order."""

    def __init__(self, jobs: Sequence[Job]) -> None:
        self.jobs = jobs
        # noise-free charges depend on the setting (its profile); factors on the seed and link_cv, never the setting
        self._profiles, self._by_profile = distinct([(id(j.profile), j.bytes_scale) for j in jobs])
        self._free = [jobs[i].cost.noise_free() for i in self._profiles]
        draws, self._by_draw = distinct([_draw_key(j) for j in jobs])
        self._drawers = [(_Factors(jobs[i].cost), jobs[i].bytes_scale, i) for i in draws]
        self._cached: dict[Call, Lanes] = {}

    def _noise_free(self, call: Call, issue: dict[int, Lanes]) -> Lanes:
        if call.kind == "parameter_server_async":  # its charge depends on when each member arrived: per lane
            models = [self._free[p] for p in self._by_profile.tolist()]
            return np.array(
                [
                    charges.parameter_server_async(model, call.ranks, call.nbytes * j.bytes_scale,
                                                   [float(issue[r][lane]) for r in call.ranks])[0]
                    for lane, (j, model) in enumerate(zip(self.jobs, models, strict=True))
                ]
            )  # fmt: skip
        cached = self._cached.get(call)
        if cached is None:
            free = [call.seconds(m, self.jobs[i].bytes_scale) for m, i in zip(self._free, self._profiles, strict=True)]
            cached = self._cached[call] = np.array(free)[self._by_profile]
        return cached

    def _factor(self, drawer: _Factors, bytes_scale: float, lane: int, call: Call, issue: dict[int, Lanes]) -> float:
        drawer.factors.clear()
        if call.kind == "parameter_server_async":
            arrivals = [float(issue[r][lane]) for r in call.ranks]
            charges.parameter_server_async(drawer, call.ranks, call.nbytes * bytes_scale, arrivals)
        else:
            call.seconds(drawer, bytes_scale)
        if len(drawer.factors) > 1:
            raise Diverged(f"a {call.kind} charge draws link noise {len(drawer.factors)} times")
        return drawer.factors[0] if drawer.factors else 1.0

    def seconds(self, call: Call, issue: dict[int, Lanes]) -> Lanes:
        """``call.seconds(job.cost, job.bytes_scale)`` of every lane's job, each model drawing its next factor."""
        free = self._noise_free(call, issue)
        zero = free == 0
        if zero.any() and not zero.all():
            raise Diverged(f"a {call.kind} charge is zero in some settings only: their link-noise draws part ways")
        factors = np.array([self._factor(d, scale, lane, call, issue) for d, scale, lane in self._drawers])
        result: Lanes = free * factors[self._by_draw]
        return result


def _draw_key(job: Job) -> tuple[Any, ...]:
    """What a lane's link-noise factors depend on: its link seed, ``link_cv`` and the draws counted so far."""
    noise = job.cost.profile.noise
    return job.cost.seed_parts, noise.link_cv if noise is not None else 0.0, repr(job.cost.state_dict())

"""Check the emulator's time model against published measurements of real clusters (issue 23).

Every point in ``benchmarks/data/emulator_points.yaml`` is a measurement someone else published (its source is
named there: NVIDIA's DeepLearningExamples tables, nccl-tests outputs in NVIDIA's trackers, the Decent-DP
authors' figures and logs). This script predicts each one with the emulator's own code (the compute model
``t_fixed + b / peak``, the collective model with NCCL's algorithm and protocol choice, the in-process engine
for the Decent-DP cells) from the constants and specifications written next to the points, and reports the
relative error per point, the median and worst error per source and overall, and whether the ordering of
methods in each published comparison comes out right. Nothing is trained but the engine cells' tiny proxy (a
few steps of an 8x8 CNN).

**The figure of merit is the leave-one-source-out error.** The constants are derived from the points marked
``role: calibrate`` and from measurements the data file cites (each constant's ``from_points`` /
``from_sources``). Scoring a source with constants chosen from its own points measures the fit, not the
prediction, so each source S is predicted in its own *fold*: every constant is re-derived without S (from the
calibration points of other sources, else from its ``fallback``, which names where it comes from instead), and
S's points are scored with those. The statistics, the bounds and the error bands are the folds' errors; the
errors with every constant from every source appear only labelled "in sample (fit)". What a fold cannot take
away: each point's own specification (its 1-GPU row ``peak_from``, which the emulator is given as the device's
speed) and the constants whose sources are none of the scored ones (``[S]``/``[E]`` figures, the framework
constants in :mod:`distrepro.timing.framework`).

Signs: a point's ``error`` is ``(predicted - measured) / measured`` of the quantity as published; its signed
error in the statistics is turned so that **+ means predicted too fast** (a rate too high, or a time too short:
a predicted ms/iter above the measured one is too *slow*).

    python benchmarks/validate_emulator.py            # the table, the summary, exit 1 if a bound is missed
    python benchmarks/validate_emulator.py --json out.json
    python benchmarks/validate_emulator.py --write-error-bands hardware_profiles/validation/emulator_error.yaml

Bounds, asserted in CI (``tests/test_validate_emulator.py``), out of sample and set from what the model does now
with a margin (issue 44; issue 23 asserted 15 % and 25 %): median absolute error <= 5 % over all points, <= 20 %
within each source, and every ordering right. Issue 44's goals (median <= 4 %, median *signed* error within
+-2 %, <= 10 % within each source, the Fig. 6 cells that are points within 15 % at the median) are reported beside
them as goals, not asserted: they are not a target to fit.

A DDP step (issue 33) is charged with the framework's costs (:mod:`distrepro.timing.framework`): the reducer's
per-tensor launches and bucket copies at the GPU's memory bandwidth, the expected slowest of p workers' compute
(per-step jitter), and the contention of the all-reduce with the backward it overlaps; a model with a per-layer
table (ResNet-50) has its buckets and ready times from it. Where a source's table fixes the global batch by gradient
accumulation, a point pays the optimizer update its 1-GPU row amortised over more micro-batches
(:mod:`distrepro.timing.weight_update`, the source's ``update:``, the point's ``accumulation:``). ``--ablate`` also
prints the summary with each term off, to show what each moves.
"""

from __future__ import annotations

import argparse
import copy
import csv
import hashlib
import json
import math
import statistics
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from distrepro.api.overlap import DDP_BUCKET_BYTES, DDP_FIRST_BUCKET_BYTES, emulated_buckets
from distrepro.hardware.nvlink_rings import DGX1_V100_NVLINKS, DLPERF_V100_NVLINKS, ring_links
from distrepro.hardware.profiles import HardwareProfile, read_yaml_mapping
from distrepro.hardware.workloads import load_workloads
from distrepro.timing import batch_spread as bs
from distrepro.timing import ddp_buckets as db
from distrepro.timing import framework as fw
from distrepro.timing import weight_update as wu
from distrepro.timing.timemodel import CommCostModel, ComputeModel

REPO = Path(__file__).resolve().parents[1]
DATA = Path(__file__).resolve().parent / "data" / "emulator_points.yaml"
FIG6 = REPO / "reports" / "decentdp" / "fig6.csv"
#: the committed error bands (leave-one-source-out errors per class of measurement), read by the harness
ERROR_BANDS = REPO / "hardware_profiles" / "validation" / "emulator_error.yaml"
#: units that are times: a prediction above the measurement is too slow (every other unit is a rate)
TIME_UNITS = frozenset({"ms/iter", "ms", "us", "s"})
#: the bounds asserted in CI on the median absolute relative error, out of sample (issue 44; issue 23's were 0.15, 0.25)
OVERALL_BOUND, SOURCE_BOUND = 0.05, 0.20
#: the per-step fraction that is backward (gradient buckets become ready evenly over it), as the engine's default
BACKWARD_FRACTION = 2.0 / 3.0
WORKLOAD = "validation"
#: issue 44's goals: median absolute error, median signed error, median within each source, median over the Fig. 6
#: cells that are points
GOAL_OVERALL, GOAL_SIGNED, GOAL_SOURCE, GOAL_CELLS = 0.04, 0.02, 0.10, 0.15
#: a cluster's ``intra.nvlinks``: which GPU pairs of a node are linked, and by how many links
NVLINK_TOPOLOGIES = {"dgx1-v100": DGX1_V100_NVLINKS, "dlperf-v100": DLPERF_V100_NVLINKS}
#: the framework terms of a DDP step (issue 33); ``--ablate`` switches each off in turn
TERMS = {
    "framework": True,
    "slowest_of_p": True,
    "batch_spread": True,
    "contention": True,
    "layers": True,
    "loop": True,
    "update": True,
    "bucketing": True,
}


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


@dataclass
class Report:
    """``outcomes``: every point with every constant from every source (in sample: the fit); ``out_of_sample``: each
    validation point predicted in its source's fold (the figure of merit); ``folds``: per held-out source, where
    each constant's value came from in that fold."""

    outcomes: list[Outcome]
    orderings: list[dict[str, Any]] = field(default_factory=list)
    seconds: float = 0.0
    out_of_sample: list[Outcome] = field(default_factory=list)
    folds: dict[str, dict[str, dict[str, Any]]] = field(default_factory=dict)
    classes: dict[str, dict[str, str]] = field(default_factory=dict)

    def scored(self) -> list[Outcome]:
        """The validation points in sample (every constant from every source): the fit, not the figure of merit."""
        return [o for o in self.outcomes if o.point.get("role", "validate") == "validate"]

    def summary(self) -> dict[str, Any]:
        oos = self.out_of_sample
        per = {s: _stats(e) for s, e in sorted(_group(oos, lambda o: o.point["source"]).items())}
        overall = _stats([o.signed for o in oos]) | {"sources": len(per)}
        weighted = {
            "sources": len(per),
            "median": statistics.median(v["median"] for v in per.values()),
            "signed_median": statistics.median(v["signed_median"] for v in per.values()),
        }
        per_class: dict[str, dict[str, Any]] = {}
        for axis in CLASS_AXES:
            groups = _group(oos, lambda o, axis=axis: self.classes[o.point["id"]][axis])
            per_class[axis] = {
                name: _stats(errors) | _each_source_once([o for o in oos if self.classes[o.point["id"]][axis] == name])
                for name, errors in sorted(groups.items())
            }
        fit = self.scored()
        fit_per = {s: _stats(e) for s, e in sorted(_group(fit, lambda o: o.point["source"]).items())}
        checks = {
            "overall_median_within_bound": overall["median"] <= OVERALL_BOUND,
            "every_source_median_within_bound": all(v["median"] <= SOURCE_BOUND for v in per.values()),
            "every_ordering_right": all(o["right"] for o in self.orderings),
        }
        fig6 = [abs(o.signed) for o in oos if o.point["kind"] == "engine_cell" and "workload" not in o.point]
        goals = {
            "overall_median_within_4pct": overall["median"] <= GOAL_OVERALL,
            "overall_signed_median_within_2pct": abs(overall["signed_median"]) <= GOAL_SIGNED,
            "every_source_median_within_10pct": all(v["median"] <= GOAL_SOURCE for v in per.values()),
            "fig6_cells_median_within_15pct": bool(fig6) and statistics.median(fig6) <= GOAL_CELLS,
        }
        return {
            "figure_of_merit": "leave one source out: each source predicted with every constant derived without it",
            "sign": "signed errors: + means predicted too fast (a rate too high, a time too short)",
            "overall": overall,
            "per_source": per,
            "source_weighted": weighted,
            "per_class": per_class,
            "cells": self.cells(),
            "folds": self.fold_changes(),
            "in_sample_fit": {
                "overall": _stats([o.signed for o in fit]) | {"sources": len(fit_per)},
                "per_source": fit_per,
            },
            "checks": checks,
            "goals": goals,
            "orderings": self.orderings,
        }

    def cells(self) -> dict[str, list[dict[str, Any]]]:
        """A paper's own cells that are points (the engine cells), by source, with their out-of-sample errors."""
        out: dict[str, list[dict[str, Any]]] = {}
        for o in self.out_of_sample:
            p = o.point
            if p["kind"] != "engine_cell":
                continue
            cell = {"id": p["id"], "setup": p["setup"], "gpus": p["gpus"], "method": p["method"]}
            if "workload" in p:
                cell["workload"] = p["workload"]
            if "stands_for" in p:  # the arm of a paper's claims this cell measures: its error is that arm's band
                cell["stands_for"] = p["stands_for"]
            cell |= {
                "from": "training log" if "workload" in p else "Fig. 6",
                "measured": p["measured"],
                "predicted": round(o.predicted, 2),
                "unit": p["unit"],
                "error": round(o.error, 4),
                "signed": round(o.signed, 4),
                "verdict": o.verdict,
            }
            out.setdefault(p["source"], []).append(cell)
        return out

    def fold_changes(self) -> dict[str, list[str]]:
        """Per held-out source, each constant whose value there is not the in-sample one, and where it came from."""
        out: dict[str, list[str]] = {}
        for source, constants in sorted(self.folds.items()):
            lines = []
            for name, c in constants.items():
                if c["changed"]:
                    lines.append(f"{name} = {c['value']:.4g} ({c['how']}) instead of {c['in_sample']:.4g}")
            out[source] = lines
        return out


def _group(outcomes: list[Outcome], key: Any) -> dict[str, list[float]]:
    groups: dict[str, list[float]] = {}
    for o in outcomes:
        groups.setdefault(key(o), []).append(o.signed)
    return groups


def _each_source_once(outcomes: list[Outcome]) -> dict[str, Any]:
    """A class's sources and its error with each source counted once (the median of the sources' medians in it).

    Pooled over points, a class is as narrow as its most-measured source: 26 points of one DGX benchmark at 1.5 %
    outvote 21 of another at 5.5 %. A band is meant to say how wrong a prediction for a setting like the arm's
    is, and a new setting is a new source, so the band is never narrower than the typical source."""
    per = {src: _stats(e) for src, e in sorted(_group(outcomes, lambda o: o.point["source"]).items())}
    return {
        "sources": sorted(per),
        "source_once_median": statistics.median(v["median"] for v in per.values()),
        "source_once_signed": statistics.median(v["signed_median"] for v in per.values()),
    }


def _stats(errors: list[float]) -> dict[str, Any]:
    """Median and worst absolute error, and the median *signed* error (positive: predicted too fast), of signed
    errors (:attr:`Outcome.signed`)."""
    absolute = [abs(e) for e in errors]
    worst = max(errors, key=abs)
    return {
        "points": len(errors),
        "median": statistics.median(absolute),
        "signed_median": statistics.median(errors),
        "worst": abs(worst),
        "worst_signed": worst,
    }


# ---------------------------------------------------------------------- classes of measurement

#: the axes a point is classed on, each from its fields (:func:`point_classes`)
CLASS_AXES = ("workload", "interconnect", "collective", "workload_interconnect")
WORKLOAD_CLASSES = {
    "compute_single_gpu": "compute-bound step on one GPU (t_fixed + b / peak at a batch other than the measured one)",
    "ddp_allreduce_intra_node": "data-parallel training (PyTorch DDP), bucketed all-reduce within one node",
    "ddp_allreduce_inter_node": "data-parallel training, all-reduce across nodes (DDP or the engine's All-Reduce)",
    "gossip_neighbour_exchange": "decentralized training, neighbour (gossip) exchange across nodes (Decent-DP AER)",
    "collective_microbenchmark": "one all-reduce alone (nccl-tests all_reduce_perf)",
}
#: an engine cell's method: (workload class, collective)
ENGINE_METHODS = {
    "allreduce": ("ddp_allreduce_inter_node", "all_reduce"),
    "decent-aer": ("gossip_neighbour_exchange", "gossip"),
}
#: classes the points cannot support, and why
NOT_COVERED = {
    "strong_scaling": "no two points share a global batch at different GPU counts: every scaling series here keeps "
    "the per-GPU batch (weak scaling); Fig. 6 fixes 25K tokens per iteration, but only its 16-GPU cells are points",
}


def point_classes(data: dict[str, Any], point: dict[str, Any]) -> dict[str, str]:
    """The point's class on each axis, from its fields: workload (:data:`WORKLOAD_CLASSES`), interconnect (the
    slowest fabric its traffic crosses: ``none`` on one GPU) and collective."""
    kind = point["kind"]
    if kind == "compute_throughput":
        classes = {"workload": "compute_single_gpu", "interconnect": "none", "collective": "none"}
    elif kind in ("ddp_throughput", "nccl_allreduce"):
        spec = data["clusters"][point["cluster"]]
        across = point["gpus"] > spec["gpus_per_node"]
        link = (spec.get("nic") or spec["intra"]) if across else spec["intra"]
        if kind == "nccl_allreduce":
            workload = "collective_microbenchmark"
        else:
            workload = "ddp_allreduce_inter_node" if across else "ddp_allreduce_intra_node"
        classes = {"workload": workload, "interconnect": link["fabric"], "collective": "all_reduce"}
    elif kind == "engine_cell":
        setup = data["setups"][point["setup"]]
        workload, collective = ENGINE_METHODS[point["method"]]
        fabric = setup["inter_node" if point["gpus"] > setup["gpus_per_node"] else "intra_node"]
        classes = {"workload": workload, "interconnect": fabric, "collective": collective}
    else:
        raise ValueError(f"point {point['id']}: unknown kind {kind!r}")
    return classes | {"workload_interconnect": f"{classes['workload']}/{classes['interconnect']}"}


# ---------------------------------------------------------------------- constants, with and without a source


def _tau_from_rows(data: dict[str, Any], rows: list[tuple[float, float]], model: str, gpu: str) -> float:
    """tau (ms per sublayer, V100) from (tokens per GPU, tok/s) rows of one model on one GPU: the least-squares
    intercept of step time against tokens, per sublayer, over the GPU's tau ratio."""
    xs = [float(tokens) for tokens, _ in rows]
    ys = [tokens / tok_s for tokens, tok_s in rows]
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sum((x - mx) ** 2 for x in xs)
    intercept = my - slope * mx
    return intercept / data["models"][model]["sublayers"] / data["gpus"][gpu]["tau_ratio"] * 1000.0


#: how a constant with ``from_points`` is derived from (some of) them
DERIVATIONS = {"tau_v100_ms": _tau_from_rows}


def fold(data: dict[str, Any], held_out: str | None = None) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    """``data`` with every constant derived without the source ``held_out`` (``None``: from every source), and per
    constant its value, the sources it came from and how.

    A constant with ``from_points`` is derived (:data:`DERIVATIONS`) from those of its points not of ``held_out``
    (two at least); one whose every origin (``from_points``' sources, ``from_sources``) is ``held_out`` takes its
    ``fallback`` (a value, or rows of another source to derive it from), which must not be ``held_out``'s either;
    any other keeps its written value."""
    points = {p["id"]: p for p in data["points"]}
    out = copy.deepcopy(data)
    provenance: dict[str, dict[str, Any]] = {}
    for name, c in data["constants"].items():
        calibrating = [points[i] for i in c.get("from_points", [])]
        origins = {p["source"] for p in calibrating} | set(c.get("from_sources", []))
        kept = [p for p in calibrating if p["source"] != held_out]
        if len({(p["model"], p["gpu"]) for p in calibrating}) > 1:
            raise ValueError(f"constant {name}: its calibration points are not one model on one GPU")
        if calibrating and len(kept) >= 2:
            rows = [(p["tokens_per_gpu"], p["measured"]) for p in kept]
            value = DERIVATIONS[name](data, rows, kept[0]["model"], kept[0]["gpu"])
            came_from = sorted({p["source"] for p in kept})
            how = f"derived from {len(kept)} calibration points of {', '.join(came_from)}"
            if held_out in origins:
                how += f" (those of {held_out} left out)"
        elif held_out is not None and held_out in origins:
            fallback = c.get("fallback")
            if fallback is None or fallback.get("from_source") == held_out:
                raise ValueError(f"constant {name}: comes from {held_out} and has no fallback without it")
            if "rows" in fallback:
                rows = [(r["tokens_per_gpu"], r["tok_s"]) for r in fallback["rows"]]
                value = DERIVATIONS[name](data, rows, fallback["model"], fallback["gpu"])
            else:
                value = float(fallback["value"])
            came_from = [fallback["from_source"]] if "from_source" in fallback else []
            how = f"fallback without {held_out}: {fallback['source']}"
        else:
            value = float(c["value"])
            came_from = sorted(origins)
            how = c["source"]
        out["constants"][name]["value"] = value
        provenance[name] = {"value": value, "from": came_from, "how": how}
    return out, provenance


def validation_sources(data: dict[str, Any]) -> list[str]:
    return sorted({p["source"] for p in data["points"] if p.get("role", "validate") == "validate"})


def leave_one_source_out(
    data: dict[str, Any], known: dict[str, Outcome] | None = None
) -> tuple[list[Outcome], dict[str, dict[str, dict[str, Any]]]]:
    """Each validation point predicted in its source's fold (:func:`fold`), in the data file's order, and each
    fold's constants. An engine cell runs on a shipped profile whose constants cite the sources in its setup's
    ``constants_from``; a fold holding one of them out cannot re-derive the profile and is refused. ``known``: engine
    cells already predicted (they read no constant of the data file, so every fold predicts them alike)."""
    known = known or {}
    _, fit = fold(data)
    outcomes: dict[str, Outcome] = {}
    folds: dict[str, dict[str, dict[str, Any]]] = {}
    for source in validation_sources(data):
        fdata, constants = fold(data, source)
        folds[source] = {
            name: c | {"in_sample": fit[name]["value"], "changed": not math.isclose(c["value"], fit[name]["value"])}
            for name, c in constants.items()
        }
        for p in fdata["points"]:
            if p["source"] != source or p.get("role", "validate") != "validate":
                continue
            if p["kind"] == "engine_cell":
                setup = data["setups"][p["setup"]]
                if source in setup["constants_from"]:
                    raise ValueError(f"{p['id']}: the shipped profile of {p['setup']} has constants from {source}")
                outcomes[p["id"]] = known.get(p["id"]) or predict(fdata, p)
            else:
                outcomes[p["id"]] = predict(fdata, p)
    order = [p["id"] for p in data["points"] if p["id"] in outcomes]
    return [outcomes[i] for i in order], folds


# ---------------------------------------------------------------------- building blocks


def _tau_s(data: dict[str, Any], gpu: str) -> float:
    """Fixed step cost per transformer sublayer on ``gpu`` (seconds)."""
    return data["constants"]["tau_v100_ms"]["value"] * data["gpus"][gpu]["tau_ratio"] / 1000.0


def _compute_figures(data: dict[str, Any], point: dict[str, Any], gpu: str) -> tuple[float, float]:
    """(t_fixed in s, peak in tokens/s) of the point's model on ``gpu``: t_fixed = sublayers x tau; the peak from
    the 1-GPU measurement ``peak_from`` (tokens/step, tokens/s) of the same table: peak = b / (t(b) - t_fixed).
    (A point whose batch is its 1-GPU row's gets t(b) = the measured 1-GPU step whatever t_fixed is.)"""
    sublayers = data["models"][point["model"]]["sublayers"]
    t_fixed = sublayers * _tau_s(data, gpu) if sublayers else 0.0
    ref = point.get("peak_from") or {"tokens_per_gpu": point["tokens_per_gpu"], "tok_s": point["measured"]}
    step = ref["tokens_per_gpu"] / ref["tok_s"]
    return t_fixed, ref["tokens_per_gpu"] / (step - t_fixed)


def _link(data: dict[str, Any], spec: dict[str, Any], members: int = 0) -> dict[str, Any]:
    """A profile link: the line rate times the efficiency constant the link names (the fold's value of it). A node
    whose GPUs are not all linked (``nvlinks:``, a hybrid cube-mesh) gives a ring over its first ``members`` GPUs
    the links its rings can use (:func:`distrepro.hardware.nvlink_rings.ring_links`) times one link's rate."""
    line = spec["line_gbytes_per_s"]
    if "nvlinks" in spec and members >= 2:
        line = ring_links(NVLINK_TOPOLOGIES[spec["nvlinks"]], range(members)) * spec["link_gbytes_per_s"]
    gbytes = line * data["constants"][spec["efficiency"]]["value"]
    return {"latency_us": spec["latency_us"], "bandwidth_gbytes_per_s": gbytes, "source": spec["source"]}


def cluster_profile(
    data: dict[str, Any], cluster: str, gpus: int, t_fixed: float = 0.0, peak: float = 1.0
) -> HardwareProfile:
    """An in-memory profile of ``gpus`` GPUs of ``cluster``, node by node, charging one token as one sample."""
    spec = data["clusters"][cluster]
    per = spec["gpus_per_node"]
    counts = [min(per, gpus - i) for i in range(0, gpus, per)]
    intra = _link(data, spec["intra"], counts[0])
    nic = _link(data, spec.get("nic") or spec["intra"])
    device = {
        "name": spec["gpu"],
        "kind": "gpu",
        "memory_gib": 16,
        "throughput_samples_per_s": {WORKLOAD: peak},
        "step_overhead_ms": {WORKLOAD: t_fixed * 1000.0},
        "source": "[D] benchmarks/data/emulator_points.yaml",
    }
    nodes = [{"name": f"n{i}", "nic": nic, "devices": [device | {"count": c}]} for i, c in enumerate(counts)]
    profile = {
        "schema_version": 2,
        "name": f"{cluster}-{gpus}",
        "description": "validation cluster",
        "nodes": nodes,
        "network": {"intra_node": intra, "inter_node": nic},
    }
    return HardwareProfile.model_validate(profile)


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
) -> float:
    """One data-parallel step with PyTorch DDP's overlap (:func:`distrepro.timing.framework.ddp_step_s`): buckets
    launched on one stream as backward makes them ready, the step ending when compute and the last bucket are done.

    Buckets: cut where the source's own DDP cuts them (``bucketing``, :mod:`distrepro.timing.ddp_buckets`: PyTorch's
    1 MiB first bucket then 25 MiB, apex's ``message_size`` elements, or one bucket), over the model's per-layer
    table (``workload:``, each bucket ready when backward passes its last layer) scaled to ``grad_bytes``, else with
    the gradients ready evenly over backward; without ``bucketing`` (or with the term off) PyTorch's caps in the
    table's units and 25 MiB buckets when there is no table, as before round 10.
    Framework terms (:data:`TERMS`): the ``reducer``'s kernels per tensor (the model's ``tensors``) and per bucket
    and its passes over ``grad_bytes`` at the GPU's memory bandwidth
    (:func:`distrepro.timing.framework.reducer_seconds`) added to backward; compute x the expected slowest of
    ``ranks`` (per-step jitter; with ``spread``, each rank's own length-bucketed batch times its jitter,
    :func:`distrepro.timing.batch_spread.slowest_factor`); backward slowed by the contention factor for as long
    as a bucket overlaps it."""
    model = model or {}
    t_c = compute.nominal_step_seconds(0, tokens)
    if TERMS["slowest_of_p"]:
        if spread is not None and TERMS["batch_spread"]:
            t_c *= bs.slowest_factor(spread, ranks, fw.STEP_CV)
        else:
            t_c *= fw.expected_max_factor(ranks)
    world = list(range(ranks))
    table = load_workloads()[model["workload"]].layers if TERMS["layers"] and model.get("workload") else None
    own = bucketing if TERMS["bucketing"] else None
    if table is not None:
        scale = grad_bytes / (4.0 * table.params)
        caps = own.in_units(scale) if own is not None else (DDP_BUCKET_BYTES, DDP_FIRST_BUCKET_BYTES)
        plan = [(b.ready, cost.all_reduce(world, b.nbytes * scale)) for b in emulated_buckets(table, *caps)]
    elif own is not None:
        plan = [(ready, cost.all_reduce(world, size)) for ready, size in own.even_plan(grad_bytes)]
    else:
        n_buckets = max(1, math.ceil(grad_bytes / DDP_BUCKET_BYTES))
        sizes = [DDP_BUCKET_BYTES] * (n_buckets - 1) + [grad_bytes - DDP_BUCKET_BYTES * (n_buckets - 1)]
        done, plan = 0.0, []
        for size in sizes:
            done += size
            plan.append((done / grad_bytes, cost.all_reduce(world, size)))
    overhead = 0.0
    if TERMS["framework"] and ranks > 1:
        overhead = fw.reducer_seconds(reducer, model.get("tensors", 0), len(plan), grad_bytes, memory_bytes_per_s)
    contention = fw.CONTENTION if TERMS["contention"] else 0.0
    return fw.ddp_step_s(t_c, BACKWARD_FRACTION, plan, overhead, contention)


def batch_spread_of(data: dict[str, Any], point: dict[str, Any]) -> bs.LengthBucketing | None:
    """How the point's source batches its sentences by length (its ``batch_spread:``, at the point's tokens per
    GPU as ``--max-tokens``), None for a source whose ranks' batches are alike (fixed shapes)."""
    block = data["sources"][point["source"]].get("batch_spread")
    if block is None:
        return None
    fields = [f for f in bs.LengthBucketing.__dataclass_fields__ if f not in ("max_tokens", "max_length", "source")]
    missing = [f for f in (*fields, "source") if f not in block]
    if missing:
        raise ValueError(f"source {point['source']}: batch_spread lacks {', '.join(missing)}")
    figures = {name: float(block[name]) for name in fields if name != "batch_multiple"}
    return bs.LengthBucketing(
        max_tokens=int(point["tokens_per_gpu"]),
        batch_multiple=int(block["batch_multiple"]),
        max_length=int(block.get("max_length", 250)),
        source=str(block["source"]),
        **figures,
    )


def loop_extras_of(data: dict[str, Any], point: dict[str, Any]) -> fw.LoopExtras | None:
    """What the point's source's training loop does per step on more than one GPU outside DDP (its ``per_step:``,
    counted from its code), None when nobody has counted it."""
    block = data["sources"][point["source"]].get("per_step")
    if block is None:
        return None
    fields = ("syncs_fixed", "syncs_per_rank", "exposed_ops_per_tensor", "all_gather_bytes")
    missing = [f for f in (*fields, "source") if f not in block]
    if missing:
        raise ValueError(f"source {point['source']}: per_step lacks {', '.join(missing)}")
    syncs_fixed, syncs_per_rank, exposed, gather = (float(block[f]) for f in fields)
    return fw.LoopExtras(syncs_fixed, syncs_per_rank, exposed, gather, str(block["source"]))


def loop_seconds(
    data: dict[str, Any], point: dict[str, Any], cost: CommCostModel, grad_bytes: float, bandwidth: float | None
) -> float:
    """Seconds the source's training loop adds per step outside DDP (:func:`distrepro.timing.framework.
    loop_extras_seconds`), its small all-gather priced by the collective model; 0 when switched off or not counted."""
    extras = loop_extras_of(data, point)
    if extras is None or not TERMS["loop"]:
        return 0.0
    ranks = point["gpus"]
    gather = cost.all_gather(range(ranks), extras.all_gather_bytes) if extras.all_gather_bytes and ranks > 1 else 0.0
    tensors = data["models"][point["model"]].get("tensors", 0)
    return fw.loop_extras_seconds(extras, ranks, tensors, grad_bytes, bandwidth, gather)


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


def reducer_of(data: dict[str, Any], point: dict[str, Any]) -> fw.Reducer:
    """The DDP implementation the point's source ran (its own ``ddp:``, else its source's), as its code names it."""
    name = point.get("ddp") or data["sources"][point["source"]].get("ddp", "torch")
    if name not in fw.REDUCERS:
        raise ValueError(f"point {point['id']}: ddp {name!r} is none of {sorted(fw.REDUCERS)}")
    return fw.REDUCERS[name]


def bucketing_of(data: dict[str, Any], point: dict[str, Any], grad_bytes: float) -> tuple[str, db.Bucketing]:
    """Where the point's DDP cut its buckets, as its script set them: the point's ``bucketing:``, else its source's
    (when the point runs the source's DDP), else the default of the DDP it ran (``torch-default``,
    ``apex-default``), each a named entry of the data's ``bucketings:``."""
    source = data["sources"][point["source"]]
    ddp = reducer_of(data, point).name
    name = point.get("bucketing")
    if name is None and ddp == source.get("ddp", "torch"):
        name = source.get("bucketing")
    name = name or f"{ddp}-default"
    block = data.get("bucketings", {}).get(name)
    if block is None:
        raise ValueError(f"point {point['id']}: bucketing {name!r} is not among the data's bucketings")
    text = str(block["source"])
    if block.get("one_bucket"):
        return name, db.Bucketing(math.inf, math.inf, text)
    if "elements" in block:
        params = data["models"][point["model"]].get("params")
        if params is None:
            raise ValueError(
                f"point {point['id']}: bucketing {name!r} counts elements; model {point['model']} has no params"
            )
        return name, db.Bucketing.of_elements(float(block["elements"]), db.bytes_per_element(grad_bytes, params), text)
    mib = 1024.0 * 1024.0
    return name, db.Bucketing(float(block["cap_mib"]) * mib, float(block["first_cap_mib"]) * mib, text)


# ---------------------------------------------------------------------- predictions per kind


def predict_compute(data: dict[str, Any], point: dict[str, Any]) -> Outcome:
    t_fixed, peak = _compute_figures(data, point, point["gpu"])
    profile = cluster_profile(data, "dgx-a100", 1, t_fixed, peak)  # links unused: one GPU
    compute = ComputeModel(profile, WORKLOAD, 1.0)
    step = compute.nominal_step_seconds(0, point["tokens_per_gpu"])
    note = f"t_fixed {t_fixed * 1e3:.1f} ms, peak {peak:,.0f} tok/s"
    return Outcome(point, point["tokens_per_gpu"] / step, note)


def predict_ddp(data: dict[str, Any], point: dict[str, Any]) -> Outcome:
    gpu = data["clusters"][point["cluster"]]["gpu"]
    t_fixed, peak = _compute_figures(data, point, gpu)
    profile = cluster_profile(data, point["cluster"], point["gpus"], t_fixed, peak)
    compute = ComputeModel(profile, WORKLOAD, 1.0)
    cost = CommCostModel(profile)
    model = data["models"][point["model"]]
    grad = point.get("grad_bytes", model["grad_bytes"])
    memory = data["gpus"][gpu].get("memory_gbytes_per_s")
    bandwidth = memory * 1e9 if memory else None
    reducer = reducer_of(data, point)
    spread = batch_spread_of(data, point)
    bucket_name, bucketing = bucketing_of(data, point, grad)
    tokens, ranks = point["tokens_per_gpu"], point["gpus"]
    step = ddp_step_seconds(compute, cost, tokens, grad, ranks, model, bandwidth, reducer, spread, bucketing)
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


def predict_engine(point: dict[str, Any]) -> Outcome:
    """The Decent-DP grid's cell on the shipped profile, run by the in-process engine alone (nothing logged)."""
    from distrepro.config.run_config import validate_config
    from distrepro.job.resolve import build_job
    from distrepro.orchestration.campaign import get_engine
    from distrepro.plugins.registry import plugin_module

    fig6 = plugin_module("decentdp", "fig6")
    steps = fig6.cell_steps(point["method"], point["gpus"])
    workload = point.get("workload", fig6.WORKLOAD)
    raw = fig6.cell_config(point["setup"], point["gpus"], point["method"], steps, workload, point.get("batch_per_gpu"))
    cfg = validate_config(raw)
    run = get_engine(cfg.engine).run_cell(build_job(cfg, cfg.seeds[0]), None)
    return Outcome(point, fig6.ms_per_iter(run.evals), f"in-process engine, hardware_profiles/{cfg.profile}.yaml")


def predict(data: dict[str, Any], point: dict[str, Any]) -> Outcome:
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


# ---------------------------------------------------------------------- orderings


def orderings(data: dict[str, Any], outcomes: list[Outcome], fig6: Path = FIG6) -> list[dict[str, Any]]:
    """Each published comparison of methods, checked on the predictions: the measured pairs among the points, and
    the paper's stated orderings (``comparisons`` in the data file) on the Fig. 6 grid the current model built
    (``reports/decentdp/fig6.csv``; its cells that are also points here must equal the fresh predictions, so a
    stale grid fails instead of passing)."""
    out: list[dict[str, Any]] = []
    by_id = {o.point["id"]: o for o in outcomes}
    grid: dict[tuple[str, int, str], float] = {}
    if fig6.is_file():
        with fig6.open(encoding="utf-8") as fh:
            grid = {(r["setup"], int(r["gpus"]), r["method"]): float(r["ms_per_iter"]) for r in csv.DictReader(fh)}
    for o in outcomes:
        p = o.point
        if p["kind"] == "engine_cell" and "workload" not in p:
            cell = grid.get((p["setup"], p["gpus"], p["method"]))
            fresh = cell is not None and abs(cell - o.predicted) <= 0.01 + 1e-3 * o.predicted
            out.append(
                {
                    "what": f"{fig6.name} cell {p['setup']}/{p['gpus']}/{p['method']} is current",
                    "right": fresh,
                    "detail": f"grid {cell} vs fresh {o.predicted:.2f} ms",
                }
            )
    for comp in data.get("comparisons", []):
        if "faster" in comp:  # two measured points: the faster must be predicted faster
            fast, slow = by_id[comp["faster"]], by_id[comp["slower"]]
            right = fast.predicted < slow.predicted
            detail = f"{fast.predicted:.1f} < {slow.predicted:.1f} ms predicted ({comp['source_says']})"
            out.append({"what": comp["what"], "right": right, "detail": detail})
            continue
        for setup, gpus in comp["cells"]:
            a = grid.get((setup, gpus, comp["faster_method"]))
            b = grid.get((setup, gpus, comp["slower_method"]))
            right = a is not None and b is not None and a < b
            detail = f"{comp['faster_method']} {a} < {comp['slower_method']} {b} ms ({comp['source_says']})"
            out.append({"what": f"{comp['what']} at {setup}/{gpus}", "right": right, "detail": detail})
    return out


# ---------------------------------------------------------------------- driver


def run(path: Path = DATA, fig6: Path = FIG6) -> Report:
    start = time.perf_counter()
    raw = read_yaml_mapping(path, "emulator validation data")
    data, _ = fold(raw)  # in sample: every constant from every source
    outcomes = [predict(data, p) for p in data["points"]]
    known = {o.point["id"]: o for o in outcomes if o.point["kind"] == "engine_cell"}
    oos, folds = leave_one_source_out(raw, known)
    by_id = {o.point["id"]: o for o in outcomes} | {o.point["id"]: o for o in oos}
    report = Report(outcomes, orderings(data, list(by_id.values()), fig6), out_of_sample=oos, folds=folds)
    report.classes = {o.point["id"]: point_classes(data, o.point) for o in oos}
    report.seconds = time.perf_counter() - start
    return report


def render(report: Report) -> str:
    fit = {o.point["id"]: o for o in report.outcomes}
    lines = [
        "Each source predicted with every constant derived without it (leave one source out). A point's error is "
        "(predicted - measured) / measured of the quantity as published, with its direction in words; the "
        "summaries' signed errors: + = predicted too fast.",
        "",
        "| point | source | measured | predicted | error (as published) | in sample (fit) | how |",
        "|---|---|---:|---:|---|---:|---|",
    ]
    for o in report.out_of_sample:
        p = o.point
        lines.append(
            f"| {p['id']} | {p['source']} | {p['measured']:,.4g} {p['unit']} | {o.predicted:,.4g} | "
            f"{o.describe()} | {fit[p['id']].error:+.1%} | {o.note} |"
        )
    for o in report.outcomes:
        if o.point.get("role") == "calibrate":
            p = o.point
            lines.append(
                f"| {p['id']} (calibration, not scored) | {p['source']} | {p['measured']:,.4g} {p['unit']} | "
                f"{o.predicted:,.4g} | | {o.error:+.1%} | {o.note} |"
            )
    s = report.summary()
    lines += ["", "Folds: the constants a held-out source changes (every other constant keeps its written value)."]
    for source, changes in s["folds"].items():
        lines.append(f"* without {source}: " + ("; ".join(changes) if changes else "no constant comes from it"))
    lines += ["", "Out of sample (leave one source out): the figure of merit", "", _SUMMARY_HEAD, _SUMMARY_RULE]
    lines += [_summary_row(src, v) for src, v in s["per_source"].items()]
    lines.append(_summary_row("**all**", s["overall"]))
    w = s["source_weighted"]
    lines.append(
        f"| each source once (median of the {w['sources']} medians) | | {w['median']:.1%} | "
        f"{w['signed_median']:+.1%} | |"
    )
    for axis in CLASS_AXES:
        lines += [
            "",
            f"| {axis} (out of sample) | points | median abs. error | median signed error | worst error | sources |",
            "|---|---:|---:|---:|---:|---|",
        ]
        for name, v in s["per_class"][axis].items():
            lines.append(_summary_row(name, v) + f" {', '.join(v['sources'])} |")
    f = s["in_sample_fit"]["overall"]
    lines += [
        "",
        f"in sample (fit): median abs. error {f['median']:.1%}, median signed error {f['signed_median']:+.1%} over "
        f"{f['points']} points (every constant from every source, its own included)",
    ]
    lines += ["", "| ordering | right | detail |", "|---|---|---|"]
    lines += [f"| {c['what']} | {'yes' if c['right'] else 'NO'} | {c['detail']} |" for c in s["orderings"]]
    lines += [
        "",
        f"checks (bounds, out of sample): {s['checks']}",
        f"goals (not asserted, out of sample): {s['goals']}",
    ]
    lines.append(f"({report.seconds:.1f} s)")
    return "\n".join(lines)


_SUMMARY_HEAD = "| source | points | median abs. error | median signed error | worst error |"
_SUMMARY_RULE = "|---|---:|---:|---:|---:|"


def _summary_row(name: str, v: dict[str, Any]) -> str:
    return f"| {name} | {v['points']} | {v['median']:.1%} | {v['signed_median']:+.1%} | {v['worst_signed']:+.1%} |"


def ablation(path: Path = DATA) -> str:
    """The analytical points' out-of-sample summary with each framework term off in turn (the engine cells are left
    out: they do not depend on these switches)."""
    data = read_yaml_mapping(path, "emulator validation data")
    data["points"] = [p for p in data["points"] if p["kind"] != "engine_cell"]
    lines = [
        "| terms (out of sample) | points | median abs. error | median signed error | worst error |",
        _SUMMARY_RULE,
    ]
    for off in (None, *TERMS):
        saved = dict(TERMS)
        if off is not None:
            TERMS[off] = False
        try:
            oos, _ = leave_one_source_out(data)
        finally:
            TERMS.update(saved)
        lines.append(_summary_row("all on" if off is None else f"without {off}", _stats([o.signed for o in oos])))
    return "\n".join(lines)


# ---------------------------------------------------------------------- error bands

_BANDS_HEADER = """\
# Emulator error bands: how far the emulator's time model is from published measurements, per class of
# measurement, as LEAVE-ONE-SOURCE-OUT errors. Each source (a publisher's table, a paper, a tracker thread) is
# predicted with every constant derived without it, so each error is that of a prediction, not of a fit: a band
# from the in-sample errors would be too narrow, because a source whose points chose a constant is close to them
# by construction. A harness reads this file to put an error band on a timing verdict of the same class.
#
# Signed errors: + means predicted too fast (a rate predicted too high, or a time too short); median_signed is the
# class's bias. median_abs / worst_abs: the median and the largest |error|. points / sources: how many points and
# which sources the class rests on (few points: a wide band is not implied to be narrow). A class's median_abs is
# the wider of pooled_median_abs (every point once) and source_once_median_abs (the median of its sources' medians,
# each source once): pooled, a class is as narrow as its most-measured source, and a new setting is a new source.
# classes.workload / interconnect / collective / workload_interconnect: the axes each point is classed on from
# its fields (benchmarks/validate_emulator.py, point_classes); cells: a paper's own cells that are points.
#
# Written by the command below; do not edit by hand (tests/test_validate_emulator.py regenerates it and compares).
"""


class _Flow(dict):
    """A mapping written on one line (``{a: 1, b: 2}``) in the error-band file."""


class _BandDumper(yaml.SafeDumper):
    pass


_BandDumper.add_representer(_Flow, lambda d, m: d.represent_mapping("tag:yaml.org,2002:map", m, flow_style=True))


def _band(v: dict[str, Any]) -> dict[str, Any]:
    out = {
        "median_abs": round(v["median"], 4),
        "median_signed": round(v["signed_median"], 4),
        "worst_abs": round(v["worst"], 4),
        "worst_signed": round(v["worst_signed"], 4),
        "points": v["points"],
    }
    if "source_once_median" in v:  # a class: the band is the wider of pooled and each-source-once
        pooled = (round(v["median"], 4), round(v["signed_median"], 4))
        once = (round(v["source_once_median"], 4), round(v["source_once_signed"], 4))
        out["median_abs"], out["median_signed"] = max(pooled, once)
        out |= {"pooled_median_abs": pooled[0], "source_once_median_abs": once[0]}
    if isinstance(v.get("sources"), list):
        out |= {"sources": len(v["sources"]), "from": v["sources"]}
    elif "sources" in v:
        out["sources"] = v["sources"]
    return _Flow(out)


def _repo_relative(path: Path) -> str:
    path = path.resolve()
    return path.relative_to(REPO).as_posix() if path.is_relative_to(REPO) else path.as_posix()


def render_error_bands(report: Report, target: Path = ERROR_BANDS, data_path: Path = DATA) -> str:
    """The error-band file's text: deterministic (rounded to 0.01 %, no date) so that regenerating it reproduces
    the committed file while nothing it depends on has changed."""
    s = report.summary()
    w = s["source_weighted"]
    fit = s["in_sample_fit"]["overall"]
    bands = {
        "schema_version": 1,
        "method": "leave one source out",
        "command": f"python benchmarks/validate_emulator.py --write-error-bands {_repo_relative(target)}",
        "data": _repo_relative(data_path),
        "data_sha256": hashlib.sha256(data_path.read_bytes()).hexdigest(),
        "sign": "+ = predicted too fast (a rate too high, a time too short)",
        "overall": _band(s["overall"]),
        "each_source_once": _Flow(
            {
                "median_abs": round(w["median"], 4),
                "median_signed": round(w["signed_median"], 4),
                "sources": w["sources"],
                "what": "median over sources of each source's median: a source with many points counts once",
            }
        ),
        "in_sample_fit": _Flow(
            {
                "median_abs": round(fit["median"], 4),
                "median_signed": round(fit["signed_median"], 4),
                "what": "for contrast only, not a band: every constant from every source, its own included",
            }
        ),
        "per_source": {name: _band(v) for name, v in s["per_source"].items()},
        "classes": {axis: {name: _band(v) for name, v in s["per_class"][axis].items()} for axis in CLASS_AXES},
        "workload_classes": WORKLOAD_CLASSES,
        "not_covered": NOT_COVERED,
        "cells": {source: [_Flow(c) for c in cells] for source, cells in s["cells"].items()},
        "folds": {name: changes for name, changes in s["folds"].items() if changes},
    }
    body = yaml.dump(bands, Dumper=_BandDumper, sort_keys=False, default_flow_style=False, width=10_000)
    return _BANDS_HEADER + body


def json_payload(report: Report) -> dict[str, Any]:
    """``--json``: the summary (out of sample; the fit under ``in_sample_fit``) and every scored point."""
    fit = {o.point["id"]: o for o in report.outcomes}
    points = [
        {
            "id": o.point["id"],
            "source": o.point["source"],
            "unit": o.point["unit"],
            "measured": o.point["measured"],
            "predicted": o.predicted,
            "error": o.error,
            "signed": o.signed,
            "verdict": o.verdict,
            "classes": report.classes[o.point["id"]],
            "in_sample_fit": {"predicted": fit[o.point["id"]].predicted, "error": fit[o.point["id"]].error},
        }
        for o in report.out_of_sample
    ]
    return report.summary() | {"points": points}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--fig6", type=Path, default=FIG6)
    parser.add_argument("--json", type=Path, help="also write the summary and every point here")
    parser.add_argument("--ablate", action="store_true", help="also print the summary with each framework term off")
    parser.add_argument(
        "--write-error-bands",
        type=Path,
        metavar="FILE",
        help=f"also write the out-of-sample error bands per class here (committed: {_repo_relative(ERROR_BANDS)})",
    )
    args = parser.parse_args(argv)
    report = run(args.data, args.fig6)
    print(render(report))
    if args.ablate:
        print("\n" + ablation(args.data))
    summary = report.summary()
    if args.json:
        args.json.write_text(json.dumps(json_payload(report), indent=1), encoding="utf-8")
    if args.write_error_bands:
        args.write_error_bands.parent.mkdir(parents=True, exist_ok=True)
        text = render_error_bands(report, args.write_error_bands, args.data)
        args.write_error_bands.write_text(text, encoding="utf-8")
    return 0 if all(summary["checks"].values()) else 1


if __name__ == "__main__":
    sys.exit(main())

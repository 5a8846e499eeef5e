"""The validation's out-of-sample errors written as the error bands timing verdicts carry, and as JSON.

Why a module of its own: ``hardware_profiles/validation/emulator_error.yaml`` is a frozen input of every
pre-registration; how it is written (its header, its classes, the wider of pooled and each-source-once) is kept
apart from how the errors are computed (``benchmarks/validate_emulator.py``).
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml
from validation_classes import CLASS_AXES, NOT_COVERED, WORKLOAD_CLASSES
from validation_paths import DATA, ERROR_BANDS, REPO

if TYPE_CHECKING:
    from validation_report import Report


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

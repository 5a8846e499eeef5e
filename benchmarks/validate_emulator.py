"""Check the emulator's time model against published measurements of real clusters.

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
(per-step jitter times each GPU's own speed), and the contention of the all-reduce with the backward it overlaps;
a model with a per-layer table (ResNet-50) has its buckets and ready times from it, one without has them ready
evenly over backward but for its input embedding (the model's ``ready_last_params``), ready when backward ends.
Where a source's table fixes the global batch by gradient accumulation, a point pays the optimizer update its 1-GPU
row amortised over more micro-batches (:mod:`distrepro.timing.weight_update`, the source's ``update:``, the
point's ``accumulation:``).
``--ablate`` also prints the summary with each term off, to show what each moves.

Its parts, each a module beside it: ``validation_model.py`` (one point's prediction and the framework terms),
``validation_folds.py`` (the constants with and without a source), ``validation_classes.py`` (the classes a point
is counted in), ``validation_orderings.py`` (the published orderings of methods), ``validation_report.py`` (the
scores per source, per class and overall, the bounds and the goals), ``validation_render.py`` (the report as
text), ``validation_bands.py`` (the error-band file and the JSON), ``validation_paths.py``; this module predicts
every point in its fold and is the command.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path
from typing import Any

from validation_bands import _repo_relative, json_payload, render_error_bands
from validation_classes import CLASS_AXES, ENGINE_METHODS, NOT_COVERED, WORKLOAD_CLASSES, point_classes
from validation_cluster import NVLINK_TOPOLOGIES, WORKLOAD, cluster_profile
from validation_folds import DERIVATIONS, fold, validation_sources
from validation_model import (
    BACKWARD_FRACTION,
    TERMS,
    TIME_UNITS,
    CommCostModel,
    ComputeModel,
    Outcome,
    bs,
    ddp_step_seconds,
    fw,
    loop_seconds,
    predict,
    predict_compute,
    predict_ddp,
    predict_engine,
    predict_nccl,
    update_seconds_of,
)
from validation_orderings import cell_figure, is_grid_cell, orderings
from validation_paths import DATA, ERROR_BANDS, FIG6, REPO
from validation_plot import plot
from validation_render import SUMMARY_RULE, render, summary_row
from validation_report import OVERALL_BOUND, SOURCE_BOUND, Report, stats
from validation_scripts import batch_spread_of, bucketing_of, loop_extras_of, reducer_of, synced_share

from distrepro.hardware.profiles import read_yaml_mapping

#: what the tests and callers reach through this module (the validation's parts live in its sibling modules)
__all__ = [
    "BACKWARD_FRACTION",
    "CLASS_AXES",
    "DATA",
    "DERIVATIONS",
    "ENGINE_METHODS",
    "ERROR_BANDS",
    "FIG6",
    "NOT_COVERED",
    "NVLINK_TOPOLOGIES",
    "OVERALL_BOUND",
    "REPO",
    "SOURCE_BOUND",
    "TERMS",
    "TIME_UNITS",
    "WORKLOAD",
    "WORKLOAD_CLASSES",
    "CommCostModel",
    "ComputeModel",
    "Outcome",
    "Report",
    "batch_spread_of",
    "bs",
    "bucketing_of",
    "cell_figure",
    "cluster_profile",
    "ddp_step_seconds",
    "fold",
    "fw",
    "is_grid_cell",
    "json_payload",
    "leave_one_source_out",
    "loop_extras_of",
    "loop_seconds",
    "main",
    "orderings",
    "point_classes",
    "predict",
    "predict_compute",
    "predict_ddp",
    "predict_engine",
    "predict_nccl",
    "read_yaml_mapping",
    "reducer_of",
    "render",
    "render_error_bands",
    "run",
    "stats",
    "synced_share",
    "update_seconds_of",
    "validation_sources",
]


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


def ablation(path: Path = DATA) -> str:
    """The analytical points' out-of-sample summary with each framework term off in turn (the engine cells are left
    out: they do not depend on these switches)."""
    data = read_yaml_mapping(path, "emulator validation data")
    data["points"] = [p for p in data["points"] if p["kind"] != "engine_cell"]
    lines = [
        "| terms (out of sample) | points | median abs. error | median signed error | worst error |",
        SUMMARY_RULE,
    ]
    for off in (None, *TERMS):
        saved = dict(TERMS)
        if off is not None:
            TERMS[off] = False
        try:
            oos, _ = leave_one_source_out(data)
        finally:
            TERMS.update(saved)
        lines.append(summary_row("all on" if off is None else f"without {off}", stats([o.signed for o in oos])))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--data",
        type=Path,
        default=DATA,
        help="the points and constants (default: the committed benchmarks/data/emulator_points.yaml); a copy with "
        "points added scores them the same way, each source left out in turn",
    )
    parser.add_argument(
        "--fig6",
        type=Path,
        default=FIG6,
        help="the Decent-DP grid whose orderings are checked (default: reports/decentdp/fig6.csv)",
    )
    parser.add_argument("--json", type=Path, help="also write the summary and every point here")
    parser.add_argument(
        "--ablate",
        action="store_true",
        help="also print the summary with each model term off (framework terms, NCCL's ring slices)",
    )
    parser.add_argument(
        "--write-error-bands",
        type=Path,
        metavar="FILE",
        help=f"also write the out-of-sample error bands per class here (committed: {_repo_relative(ERROR_BANDS)})",
    )
    parser.add_argument(
        "--plot",
        type=Path,
        metavar="PNG",
        help="also draw each point's out-of-sample signed error by GPU count and source (docs/emulator_validation.png)",
    )
    args = parser.parse_args(argv)
    report = run(args.data, args.fig6)
    print(render(report))
    if args.ablate:
        print("\n" + ablation(args.data))
    summary = report.summary()
    if args.json:
        args.json.write_text(json.dumps(json_payload(report), indent=1), encoding="utf-8")
    if args.plot:
        overall = summary["overall"]
        title = (
            f"{len(report.out_of_sample)} published measurements, each source predicted without its own constants: "
            f"median |error| {overall['median']:.1%}, signed {overall['signed_median']:+.1%}"
        )
        drawn = plot(report.out_of_sample, args.plot, title)
        print(f"plot: {args.plot} ({drawn['points']} points, {drawn['clipped']} beyond the axis, labelled)")
    if args.write_error_bands:
        args.write_error_bands.parent.mkdir(parents=True, exist_ok=True)
        text = render_error_bands(report, args.write_error_bands, args.data)
        args.write_error_bands.write_text(text, encoding="utf-8")
    return 0 if all(summary["checks"].values()) else 1


if __name__ == "__main__":
    sys.exit(main())

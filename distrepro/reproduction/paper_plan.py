"""``distrepro plan PAPER [--scale S]``: what ``distrepro reproduce PAPER --scale S`` would cost, said before it runs.

Every arm that ``reproduce`` would train at the scale (:func:`~distrepro.reproduction.selection.choose_arms`), each
loaded as that arm (:func:`~distrepro.reproduction.selection.arm_overrides`) and priced by the plan of one run
(:func:`distrepro.orchestration.plan.build_plan`: the emulated time of one seed), times the seeds it would run: the
scale's pre-registered confirmatory seeds where a record exists (:func:`~distrepro.claims.preregistration.
registered_seeds`), else the config's own. Totals are given in emulated hours (the emulated cluster's clock),
device-hours (× the profile's devices) and GPU-hours (× its devices of ``kind: gpu``: what the same runs would
take on the real cluster the profile describes); where a profile declares noise, the GPU-hours with the plan's
``time.expected`` too (the slowest of p at every wait, :mod:`distrepro.orchestration.plan_noise`).

Beside the cost: the cheapest scale that decides each headline claim (:func:`distrepro.claims.schema.at_scale`;
timing claims are decided where their clock is, accuracy ones move to mid and gpu when all their arms have a
config there), and a warning where a recipe that names GPUs would train on this machine's CPU.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from distrepro.claims.papers import PaperInfo, arm_config_path, arms_at_scale, find_paper, known_papers
from distrepro.claims.schema import Scale, at_scale, claim_arms
from distrepro.config.overrides import Override
from distrepro.errors import ConfigError
from distrepro.orchestration.plan import build_plan
from distrepro.orchestration.plan_time import NOT_ESTIMATED

#: the scales from the cheapest to the dearest: the first one that decides a claim is the one to run for it
SCALES: tuple[Scale, ...] = ("proxy", "mid", "gpu", "paper")


def plan_paper(
    paper: str, scale: Scale = "proxy", overrides: Sequence[Override] = (), root: Path | None = None
) -> dict[str, Any]:
    """The plan of ``paper`` at ``scale``: keys ``paper``, ``scale``, ``seeds_from``, ``arms`` (one entry per arm:
    config, profile, devices, GPUs, seeds, emulated seconds per seed, hours), ``not_planned`` (arms left out, and
    why), ``totals``, ``claims`` (the cheapest scale deciding each headline claim) and ``warnings``."""
    from distrepro.claims.papers import UnknownPaperError
    from distrepro.claims.preregistration import registered_seeds
    from distrepro.reproduction.selection import arm_overrides, choose_arms

    info = find_paper(paper, root)
    if info.spec is None or info.path is None:
        raise UnknownPaperError(paper, known_papers(root))
    registered = registered_seeds(info.path, scale)
    seeds_from = "the config of each arm"
    if registered is not None:
        seeds_from = (
            f"pre-registered in {registered[1].parent.parent.name}/{registered[1].parent.name}/{registered[1].name}"
        )
    arms: list[dict[str, Any]] = []
    left_out: dict[str, str] = {}
    for name in choose_arms(info, scale, None, None, root):
        arm = info.spec.setup.arms[name]
        try:
            path = arm_config_path(info.path, name, arm.config, scale, root)
        except ConfigError as exc:
            left_out[name] = exc.message
            continue
        plan = build_plan(path, [*arm_overrides(info, name, scale), *overrides])
        seeds = registered[0] if registered is not None else list(plan["config"]["seeds"])
        arms.append(_arm_entry(name, path, plan, seeds))
    for name, arm in info.spec.setup.arms.items():
        if arm.optional and name not in left_out and not any(a["arm"] == name for a in arms):
            left_out[name] = "optional (run with --with)"
    return {
        "paper": info.id,
        "title": info.title,
        "scale": scale,
        "seeds_from": seeds_from,
        "arms": arms,
        "not_planned": left_out,
        "totals": _totals(arms),
        "claims": deciding_scales(info, root),
        "warnings": _cpu_warnings(arms, scale),
    }


def _arm_entry(name: str, path: Path, plan: dict[str, Any], seeds: list[int]) -> dict[str, Any]:
    cluster, per_seed = plan["cluster"], plan["time"]["total_s"]
    entry: dict[str, Any] = {
        "arm": name,
        "config": str(path),
        "profile": cluster["profile"],
        "devices": cluster["devices"],
        "gpus": cluster["gpus"],
        "device": plan["config"]["device"],
        "seeds": seeds,
        "emulated_s_per_seed": per_seed,
    }
    if isinstance(per_seed, (int, float)):
        hours = per_seed * len(seeds) / 3600
        entry |= {"emulated_h": hours, "device_h": hours * cluster["devices"], "gpu_h": hours * cluster["gpus"]}
        expected = plan["time"].get("expected", {}).get("total_s")  # with the slowest of p (declared noise)
        if isinstance(expected, float):
            entry["expected_gpu_h"] = expected * len(seeds) / 3600 * cluster["gpus"]
    else:
        entry["why_not_estimated"] = plan["time"].get("why", NOT_ESTIMATED)
    return entry


def _totals(arms: list[dict[str, Any]]) -> dict[str, Any]:
    priced = [a for a in arms if "emulated_h" in a]
    return {
        "runs": sum(len(a["seeds"]) for a in arms),
        "emulated_h": sum(a["emulated_h"] for a in priced),
        "device_h": sum(a["device_h"] for a in priced),
        "gpu_h": sum(a["gpu_h"] for a in priced),
        "not_estimated": [a["arm"] for a in arms if "emulated_h" not in a],
    } | (
        {"expected_gpu_h": sum(a.get("expected_gpu_h", a["gpu_h"]) for a in priced)}
        if any("expected_gpu_h" in a for a in priced)
        else {}
    )


def deciding_scales(info: PaperInfo, root: Path | None = None) -> dict[str, Any]:
    """For each headline claim (the paper's own, decided by measurement): its kind, the cheapest scale whose runs
    decide it (``scale``; None where no scale has configs of all its arms) and every scale that does (``scales``)."""
    from distrepro.claims.evidence import group_of

    assert info.spec is not None
    available = {scale: arms_at_scale(info, scale, root) for scale in SCALES}
    judged = {scale: at_scale(info.spec, scale, available[scale]) for scale in SCALES}
    out: dict[str, Any] = {}
    for index, claim in enumerate(info.spec.claims):
        if group_of(claim) != "headline":
            continue
        deciding = [
            scale
            for scale in SCALES
            if judged[scale].claims[index].scale == scale and set(claim_arms(claim)) <= available[scale]
        ]
        out[claim.id] = {"kind": claim.kind, "scale": deciding[0] if deciding else None, "scales": deciding}
    return out


def _cpu_warnings(arms: list[dict[str, Any]], scale: Scale) -> list[str]:
    """One line where arms whose recipe names GPUs would train on this machine's CPU
    (:func:`distrepro.orchestration.plan.cpu_warning`); at the proxy and mid scales, training on the CPU is the
    design, so only ``device: auto``/``cuda`` without CUDA is said there."""
    from distrepro.orchestration.plan import cpu_warning

    gpu_recipe = scale in ("gpu", "paper")
    lines: dict[str, list[str]] = {}
    for a in arms:
        why = cpu_warning(a["device"], a["gpus"] if gpu_recipe else 0)
        if why is not None:
            lines.setdefault(why, []).append(a["arm"])
    return [f"{len(names)} arm(s) ({', '.join(names)}): {why}" for why, names in lines.items()]


def _duration(seconds: float) -> str:
    """``12.4 s``, ``3.2 min`` or ``17.30 h``."""
    if seconds < 60:
        return f"{seconds:.3g} s"
    if seconds < 3600:
        return f"{seconds / 60:.3g} min"
    return f"{seconds / 3600:,.2f} h"


def _hours(value: float) -> str:
    """``1,383.8``, or three significant digits below 100 (``0.0417``)."""
    return f"{value:,.1f}" if value >= 100 else f"{value:.3g}"


def render_paper_plan(plan: dict[str, Any]) -> str:
    """The paper's plan for a person: one line per arm, the totals, the claims' scales, the warnings."""
    lines = [f"{plan['paper']} at {plan['scale']} scale: {plan['title']}", f"seeds: {plan['seeds_from']}"]
    lines.append("arms (emulated time of one seed; hours for every seed):")
    for a in plan["arms"]:
        seeds = len(a["seeds"])
        cluster = f"{a['profile']}, {a['devices']} devices ({a['gpus']} GPUs)"
        if "emulated_h" not in a:
            lines.append(f"  {a['arm']:<16} {cluster}, {seeds} seed(s): not estimated ({a['why_not_estimated']})")
            continue
        per = _duration(a["emulated_s_per_seed"])
        lines.append(
            f"  {a['arm']:<16} {cluster}, {seeds} seed(s) x {per} = {_hours(a['emulated_h'])} emulated h, "
            f"{_hours(a['device_h'])} device-hours, {_hours(a['gpu_h'])} GPU-hours"
        )
    for name, why in plan["not_planned"].items():
        lines.append(f"  {name:<16} not planned: {why}")
    t = plan["totals"]
    lines.append(
        f"total: {t['runs']} runs, {_hours(t['emulated_h'])} emulated hours, {_hours(t['device_h'])} device-hours, "
        f"{_hours(t['gpu_h'])} GPU-hours"
        + (f" (not estimated: {', '.join(t['not_estimated'])})" if t["not_estimated"] else "")
        + (
            f"; {_hours(t['expected_gpu_h'])} GPU-hours with the slowest of p at every wait (noise as declared)"
            if "expected_gpu_h" in t
            else ""
        )
    )
    if plan["claims"]:
        lines.append("headline claims, the cheapest scale that decides each:")
        for cid, c in plan["claims"].items():
            where = c["scale"] or "none (no scale has configs of all its arms)"
            mark = " (this scale)" if c["scale"] == plan["scale"] else ""
            also = [s for s in c["scales"][1:]]
            more = f"; also decided at {', '.join(also)}" if also else ""
            lines.append(f"  {cid} ({c['kind']}): {where}{mark}{more}")
    lines += [f"warning: {w}" for w in plan["warnings"]]
    return "\n".join(lines)

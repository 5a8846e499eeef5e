"""The first screen's answer to "why is nothing decided?": the command that decides the headline claims left open.

Every QSR headline claim is a claim at paper scale (ViT-B/16 on ImageNet), so the default proxy session decides
none of them and its first screen read "8 cannot be decided" with eight "arm missing" clauses. A reader needs the
command, the hardware and the cost instead. For each scale above the proxy that holds undecided headline claims,
this module plans every arm those claims read exactly as ``distrepro reproduce --scale <s>`` would load it
(:func:`distrepro.orchestration.plan.build_plan`: the arm's config at that scale with its method parameters) and
says: the command; the emulated cluster of the configs (profile, devices); the emulated time of every arm and seed
one after the other (the plan's time model on that cluster: how long the paper's hardware would take, not this
machine); and the arithmetic the training itself is (the plan's FLOPs), which no CPU session does in practice.
Nothing here is hard-coded: change a config and the sentence changes with it.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from distrepro.claims.evidence import group_of
from distrepro.claims.papers import PaperInfo, arm_config_path, arms_at_scale
from distrepro.claims.schema import claim_arms
from distrepro.claims.verdicts import Verdict

#: a plan of one config: ``(path, overrides) -> build_plan's dict``; injected by the tests
Planner = Callable[[Path, list[str]], dict[str, Any]]


def _hours(seconds: float) -> str:
    hours = seconds / 3600
    return f"{hours:,.0f} h" if hours >= 10 else f"{hours:.1f} h"


def _flop(flops: float) -> str:
    """``8.5e20``: two significant digits, no ``+`` in the exponent."""
    return f"{flops:.2g}".replace("e+", "e")


def _cluster(plan: dict[str, Any]) -> str:
    """``qsr-16gpu`` (16 × rtx3090), from the plan's config and its per-rank compute groups."""
    groups = plan["time"].get("compute") or []
    devices = ", ".join(f"{g['count']} × {g['device']}" for g in groups if isinstance(g, dict))
    profile = plan["config"]["profile"]
    return f"`{profile}` ({devices})" if devices else f"`{profile}`"


def _default_planner(path: Path, overrides: list[str]) -> dict[str, Any]:
    from distrepro.orchestration.plan import build_plan

    return build_plan(path, overrides)


def deciding_runs(
    info: PaperInfo, verdicts: Sequence[Verdict], root: Path | None = None, plan: Planner | None = None
) -> str:
    """One paragraph per scale above the proxy whose headline claims are all undecided here; empty otherwise."""
    spec = info.spec
    if spec is None or info.path is None:
        return ""
    planner = plan or _default_planner
    by_id = {v.claim_id: v for v in verdicts}
    open_claims: dict[str, list[Any]] = {}
    for claim in spec.claims:
        verdict = by_id.get(claim.id)
        if group_of(claim) == "headline" and claim.scale != "proxy" and verdict and verdict.verdict == "INCONCLUSIVE":
            open_claims.setdefault(str(claim.scale), []).append(claim)
    lines = []
    for scale, claims in open_claims.items():
        wanted = {a for c in claims for a in claim_arms(c)} & arms_at_scale(info, scale, root)
        arms = [(name, arm) for name, arm in spec.setup.arms.items() if name in wanted]
        if not arms:
            continue
        emulated = flops = 0.0
        clusters, seeds = [], 0
        for name, arm in arms:
            path = arm_config_path(info.path, name, arm.config, scale, root)
            sets = [f"paper={info.id}", f"scale={scale}", f"name={arm.campaign or name}", f"method={arm.method}"]
            params = [f"method_params.{k}={json.dumps(v)}" for k, v in arm.params.items()]  # as reproduce sets them
            p = planner(path, [*sets, *params])
            n = int(p["training"].get("seeds") or len(p["config"].get("seeds") or [0]))
            seeds = max(seeds, n)
            emulated += float(p["time"]["total_s"]) * n
            flops += float(p["training"].get("flops_all_seeds") or 0.0)
            if _cluster(p) not in clusters:
                clusters.append(_cluster(p))
        ids = ", ".join(c.id for c in claims)
        profiles = sorted({c.profile for c in claims if getattr(c, "profile", None)})
        others = [p for p in profiles if not any(f"`{p}`" in c for c in clusters)]
        elsewhere = (
            f" Claims on {', '.join(f'`{p}`' for p in others)} need the same arms with `--set profile=…` "
            "(each claim's notes say how)."
            if others
            else ""
        )
        lines.append(
            f"**Not decided by this session: {len(claims)} of the paper's headline claims ({ids}) are claims at "
            f"{scale} scale.** `distrepro reproduce {info.id} --scale {scale}` decides them: {len(arms)} arms × "
            f"{seeds} seeds on the emulated cluster {' and '.join(clusters)}, which would take about "
            f"{_hours(emulated)} on that hardware, every arm and seed one after the other (`distrepro plan`'s time "
            f"model); the training is {_flop(flops)} FLOP, a GPU cluster's work, not a CPU session's.{elsewhere}"
        )
    return "\n\n".join(lines) + ("\n" if lines else "")

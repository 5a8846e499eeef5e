"""Which arms a reproduction trains, and their run configs, all loaded and validated before the first one trains.

The arms come from the paper's ``paper.yaml`` (``setup.arms``): each names a method, the method parameters that
tell it apart, and the run config that produces it. Arms marked ``optional`` (e.g. the real DeepSpeed arm, which
needs an extra install and the torch.distributed engine) run only when named. At the training scales (``mid``,
``gpu``) only the arms of the claims those scales re-decide are trained by default.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from distrepro.claims.papers import PaperInfo, arm_config_path, arms_at_scale, scale_only
from distrepro.claims.schema import TRAINING_SCALES, Scale, at_scale, claim_arms
from distrepro.config.overrides import Override
from distrepro.config.run_config import RunConfig, load_config
from distrepro.errors import ConfigError


@dataclass(frozen=True)
class ArmConfig:
    """One arm to train: its name in ``setup.arms``, the config file it comes from, and the loaded config."""

    name: str
    path: Path
    config: RunConfig


def param_overrides(params: dict[str, Any]) -> list[Override]:
    """The overrides that give an arm its method parameters, as ``paper.yaml`` typed them."""
    return [Override(("method_params", k), v) for k, v in params.items()]


def arm_overrides(info: PaperInfo, name: str, scale: Scale) -> list[Override]:
    """What makes the arm's config file this arm: the paper, the scale, the campaign's name and the method with
    the arm's parameters (a reproduction's ``--set`` follow and may replace them)."""
    assert info.spec is not None
    arm = info.spec.setup.arms[name]
    fields = {"paper": info.id, "scale": scale, "name": arm.campaign or name, "method": arm.method}
    return [Override((k,), v) for k, v in fields.items()] + param_overrides(arm.params)


def choose_arms(
    info: PaperInfo, scale: Scale, arms: list[str] | None, with_arms: list[str] | None, root: Path | None
) -> list[str]:
    """The arms to train: ``arms`` if given, else every non-optional arm (at a training scale, those its claims
    need), plus ``with_arms``; an unknown name is an error naming ``setup.arms`` and the known ones."""
    assert info.spec is not None and info.path is not None  # the caller checked the paper declares arms
    default = [
        name
        for name, arm in info.spec.setup.arms.items()
        if not arm.optional and scale_only(arm.config) in (None, scale)  # a paper-only arm waits for --scale paper
    ]
    if scale in TRAINING_SCALES:  # only the arms of the claims these scales re-decide (accuracy and convergence)
        moved = at_scale(info.spec, scale, arms_at_scale(info, scale, root))
        needed = {a for c in moved.claims if c.scale == scale for a in claim_arms(c)}
        default = [name for name in default if name in needed]
    chosen = list(dict.fromkeys([*(arms or default), *(with_arms or [])]))
    unknown = [a for a in chosen if a not in info.spec.setup.arms]
    if unknown:
        raise ConfigError(info.path, "setup.arms", f"unknown arm(s) {unknown}; known: {list(info.spec.setup.arms)}")
    return chosen


def arm_configs(
    info: PaperInfo,
    chosen: list[str],
    scale: Scale,
    seeds: Sequence[int] | None,
    overrides: Sequence[Override],
    root: Path | None,
) -> list[ArmConfig]:
    """Every chosen arm's config at ``scale``, loaded (its method params validated) before any arm trains.

    ``seeds`` (``--seeds``, or the pre-registered ones) replace every config's own; ``overrides`` (``--set``) apply
    to every arm after what makes it that arm."""
    assert info.spec is not None and info.path is not None
    out: list[ArmConfig] = []
    for name in chosen:
        arm = info.spec.setup.arms[name]
        path = arm_config_path(info.path, name, arm.config, scale, root)
        sets = [*arm_overrides(info, name, scale), *overrides]
        out.append(ArmConfig(name, path, load_config(path, sets, seeds=seeds or None)))
    return out


def arm_extras(paper: str, arm_names: list[str], root: Path | None = None) -> list[str]:
    """The pip extras the named arms need (``setup.arms.<arm>.extra``), sorted, for the nox sessions.

    The noxfile may not parse YAML (it runs before anything but nox is installed), so it asks
    ``distrepro extras`` inside the session's virtualenv. An unknown paper or arm is an error, as in
    :func:`choose_arms`: printing nothing would install nothing and fail later, far from the typo.
    """
    from distrepro.claims.papers import UnknownPaperError, find_paper, known_papers

    info = find_paper(paper, root)
    if info.spec is None or info.path is None:
        raise UnknownPaperError(paper, known_papers(root))
    arms = info.spec.setup.arms
    unknown = [a for a in arm_names if a not in arms]
    if unknown:
        raise ConfigError(info.path, "setup.arms", f"unknown arm(s) {unknown}; known: {list(arms)}")
    extras = (arms[a].extra for a in arm_names)
    return sorted({e for e in extras if e})

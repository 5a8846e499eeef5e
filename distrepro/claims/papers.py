"""Finding a paper's claims file among the method folders (read as YAML, never imported).

Judging claims must not depend on torch code loading, so ``methods/*/method.py`` is never
imported here; only ``paper.yaml`` files are read, and every file of the paper is validated.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from distrepro.claims.schema import PaperSpec, validate_paper
from distrepro.config.run_config import read_yaml
from distrepro.errors import ConfigError, DistreproError, did_you_mean
from distrepro.names import check_name


@dataclass
class PaperInfo:
    """What the repo knows about a paper id: its claims file (if any) and its method folders."""

    id: str
    spec: PaperSpec | None = None
    path: Path | None = None
    method_dirs: list[Path] = field(default_factory=list)

    @property
    def title(self) -> str:
        return self.spec.citation.title if self.spec else self.id


def find_paper(paper: str, root: Path | None = None) -> PaperInfo:
    """Collect ``methods/*/paper.yaml`` whose ``citation.id`` is ``paper`` (read, not imported).

    Searched over every plugin root (``root``: that one only). Method modules are not imported:
    judging claims must not depend on torch code loading. At most one of those files may carry
    ``claims``/``setup``; the one with claims (else the first, preferring ``kind: reproduction``)
    becomes :attr:`PaperInfo.spec`. Every file found is validated.
    """
    from distrepro.plugins.registry import method_dirs

    check_name(paper, "PAPER", None)  # it becomes reports/<paper>/ and the experiment distrepro/<paper>
    dirs = list(method_dirs(root).values())
    known = {d.name for d in dirs if (d / "method.py").is_file()}
    info = PaperInfo(paper)
    candidates: list[tuple[Path, PaperSpec, dict[str, Any]]] = []
    for folder in dirs:
        path = folder / "paper.yaml"
        if not path.is_file():
            continue
        raw = read_yaml(path)  # malformed YAML anywhere is an error: it could be this paper's file
        cite = raw.get("citation")
        if not isinstance(cite, dict) or not cite.get("id"):  # an empty file could be this paper's: say which
            raise ConfigError(path, "citation.id", "missing: every paper.yaml names its paper (citation.id)")
        if not isinstance(cite, dict) or cite.get("id") != paper:
            continue
        spec = validate_paper(raw, path, known)
        info.method_dirs.append(folder)
        candidates.append((path, spec, raw))
    with_claims = [c for c in candidates if "claims" in c[2] or "setup" in c[2]]
    if len(with_claims) > 1:
        raise ConfigError(
            with_claims[1][0], "claims", f"paper {paper!r} already has claims in {with_claims[0][0]}; keep one file"
        )
    ordered = with_claims or sorted(candidates, key=lambda c: c[1].kind != "reproduction")
    if ordered:
        info.path, info.spec = ordered[0][0], ordered[0][1]
    return info


class UnknownPaperError(DistreproError):
    """A paper id that no ``methods/*/paper.yaml`` declares (and, for a report, no MLflow experiment holds)."""

    def __init__(self, paper: str, known: list[str]) -> None:
        super().__init__(f"unknown paper {paper!r}{did_you_mean(paper, known)} (known: {', '.join(known) or 'none'})")


def known_papers(root: Path | None = None) -> list[str]:
    """Ids of the papers with a reproduction (``claims`` or ``setup`` in a ``paper.yaml``), sorted.

    Baselines' citation ids are valid report targets too but are left out: the list answers "what
    can I reproduce or report on", and a typo is far likelier to be meant for one of these."""
    from distrepro.plugins.registry import method_dirs

    ids = set()
    for folder in method_dirs(root).values():
        path = folder / "paper.yaml"
        raw = read_yaml(path) if path.is_file() else {}
        cite = raw.get("citation")
        if isinstance(cite, dict) and isinstance(cite.get("id"), str) and ("claims" in raw or "setup" in raw):
            ids.add(cite["id"])
    return sorted(ids)


def scale_only(config: str | None) -> str | None:
    """The one scale an arm runs at when its ``config`` names a scaled recipe itself (``r152_qsr2.paper.yaml``:
    a paper-scale arm with no proxy), else None (the arm runs at proxy scale and at each scale with a sibling)."""
    for scale in ("paper", "mid", "gpu"):
        if config and config.endswith(f".{scale}.yaml"):
            return scale
    return None


def arm_config_path(paper_file: Path, arm_name: str, config: str | None, scale: str, root: Path | None) -> Path:
    """The run config of arm ``arm_name`` at ``scale``: its ``config`` beside the paper.yaml, else in the first
    plugin root that has it (so a user's method may reuse a shipped config); at ``paper``/``mid``/``gpu`` scale
    the sibling ``<name>.paper.yaml``/``<name>.mid.yaml``/``<name>.gpu.yaml``. A missing file is a
    :class:`ConfigError`."""
    from distrepro.plugins.roots import as_roots

    if not config:
        raise ConfigError(paper_file, f"setup.arms.{arm_name}.config", "an arm needs a run config to be reproduced")
    bases = (paper_file.parent, *as_roots(root))
    for base in bases:
        path = (base / config).resolve()
        if path.is_file():
            break
    else:
        raise ConfigError(paper_file, f"setup.arms.{arm_name}.config", f"config file '{config}' not found")
    # judged on the path as written, not as resolved: '../../../../etc/passwd' is refused, while a folder the
    # plugin's author linked into the paper's folder (a test's copy linking the shipped configs) is theirs to keep
    written = Path(os.path.normpath(base / config))
    if not written.is_relative_to(os.path.normpath(base)):
        raise ConfigError(
            paper_file,
            f"setup.arms.{arm_name}.config",
            f"'{config}' leads to {path}, outside the paper's folder and every plugin root: keep run configs there",
        )
    only = scale_only(config)
    if only is not None:  # an arm with no proxy: its config is already the recipe of the one scale it runs at
        if only != scale:
            raise ConfigError(paper_file, f"setup.arms.{arm_name}.config", f"'{config}' runs at --scale {only} only")
        return path
    if scale in ("paper", "mid", "gpu"):  # a sibling: <arm>.paper.yaml (the paper's recipe), .mid.yaml, .gpu.yaml
        scaled = path.with_name(path.name.replace(".yaml", f".{scale}.yaml"))
        if not scaled.is_file():
            raise ConfigError(
                paper_file, f"setup.arms.{arm_name}.config", f"--scale {scale} needs {scaled.name} beside {path.name}"
            )
        return scaled
    return path


def arms_at_scale(info: PaperInfo, scale: str, root: Path | None = None) -> set[str]:
    """The arms of the paper that have a run config at ``scale`` (every arm with a config at proxy scale).

    The mid and gpu scales are for the accuracy and convergence claims only, so most timing arms have no
    ``.mid.yaml``/``.gpu.yaml``: a claim moves to such a scale only when all its arms have one (:func:`at_scale`).
    """
    if info.spec is None or info.path is None:
        return set()
    found = set()
    for name, arm in info.spec.setup.arms.items():
        try:
            arm_config_path(info.path, name, arm.config, scale, root)
        except ConfigError:
            continue
        found.add(name)
    return found

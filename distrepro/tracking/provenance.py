"""Where a result came from: source revision, library versions and host.

A reproducibility claim is only checkable if every run records exactly which code, which libraries
and which machine produced it. MLflow's own ``mlflow.source.git.*`` tags are filled by context
providers that the ``MlflowClient`` API does not run (mlflow/mlflow discussion #11237),
so the suite gathers these facts itself and writes them as ordinary tags.

All three functions return ``dict[str, str]`` so the values drop straight into MLflow tags and the
report's environment block without further conversion.
"""

from __future__ import annotations

import functools
import os
import platform
import socket
import subprocess
from importlib import metadata
from pathlib import Path

UNKNOWN = "unknown"

_GIT_TIMEOUT_S = 10.0


def _git(repo: Path, *args: str) -> str | None:
    """Run one read-only git command in ``repo``; ``None`` when git is missing or the command fails.

    ``--no-optional-locks`` (and ``GIT_OPTIONAL_LOCKS=0``) stop ``git status`` from refreshing
    and rewriting ``.git/index``: a benchmark run must not take the index lock while someone is
    committing in the same checkout.
    """
    env = {**os.environ, "GIT_OPTIONAL_LOCKS": "0", "LC_ALL": "C"}
    try:
        proc = subprocess.run(
            ["git", "--no-optional-locks", "-C", str(repo), *args],
            capture_output=True,
            text=True,
            timeout=_GIT_TIMEOUT_S,
            env=env,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    if proc.returncode != 0:
        return None
    return proc.stdout.strip()


#: top-level folders the suite itself writes: changes there do not make a work tree dirty (:func:`git_info`)
OUTPUTS = ("reports",)


def git_info(repo: Path) -> dict[str, str]:
    """Return ``commit``, ``dirty`` and ``branch`` of the git work tree containing ``repo``.

    Outside a git work tree (an installed wheel, a tarball) or without a ``git`` binary every
    field is ``"unknown"``, so a run is still logged but can be told apart from a clean one.
    ``dirty`` is ``"true"`` when tracked files differ from ``HEAD`` *or* untracked files that are
    not ignored exist: an untracked new method or profile changes results just as an edit does. The work tree's
    top-level ``reports/`` is left out (:data:`OUTPUTS`): the suite writes it (a reproduction rewrites
    ``reports/<paper>/``, Decent-DP's tracked Fig. 6 grid among them), so a change there is an output of an
    earlier run, not an input of this one, and must not mark every later run of that checkout dirty.
    ``branch`` is ``"detached"`` on a detached ``HEAD``.
    """
    repo = Path(repo)
    if _git(repo, "rev-parse", "--is-inside-work-tree") != "true":
        return {"commit": UNKNOWN, "dirty": UNKNOWN, "branch": UNKNOWN}
    commit = _git(repo, "rev-parse", "HEAD") or UNKNOWN  # a repo without commits has no HEAD
    status = _git(repo, "status", "--porcelain", "--", ":(top)", *(f":(top,exclude){p}" for p in OUTPUTS))
    dirty = UNKNOWN if status is None else ("true" if status else "false")
    branch = _git(repo, "symbolic-ref", "--short", "-q", "HEAD") or "detached"
    return {"commit": commit, "dirty": dirty, "branch": branch}


def file_at_commit(path: Path, commit: str) -> str | None:
    """The text of ``path`` (a file of a git work tree) as it was at ``commit``; None without git, outside a work
    tree, for an unknown commit or a file the commit did not have."""
    path = Path(path)
    return _git(path.parent, "show", f"{commit}:./{path.name}")


def _dist_version(name: str) -> str | None:
    """Installed version of distribution ``name`` from its metadata, without importing it.

    Importing is avoided on purpose: ``import torchvision`` crashes on the CPU torch wheel
    (see ``distrepro/data/torchvision_shim.py``), and importing torch costs seconds.
    """
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def versions() -> dict[str, str]:
    """Versions of Python and of the libraries that decide numerical results and logging.

    ``torchvision`` appears only when installed; the others are ``"not installed"`` when missing.
    ``distrepro`` falls back to ``distrepro.__version__`` when the package runs from a plain checkout.
    """
    return dict(_versions())


@functools.cache
def _versions() -> dict[str, str]:
    out = {"python": platform.python_version()}
    for dist in ("torch", "torchvision", "mlflow", "numpy"):
        ver = _dist_version(dist)
        if ver is not None:
            out[dist] = ver
        elif dist != "torchvision":
            out[dist] = "not installed"
    ver = _dist_version("distrepro")
    if ver is None:
        from distrepro import __version__

        ver = __version__
    out["distrepro"] = ver
    return out


def host_info() -> dict[str, str]:
    """Hostname, CPU count, platform and CUDA availability of this machine.

    Emulated timings do not depend on the host, but wall-clock numbers and nondeterministic
    kernels do, so the host belongs in the provenance. Asking for the CUDA device name
    initialises CUDA in this process; the suite starts workers with ``spawn``, which is safe
    after that (``fork`` would not be). Cached: the host does not change during a process.
    """
    return dict(_host_info())


@functools.cache
def _host_info() -> dict[str, str]:
    try:
        usable = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        usable = os.cpu_count() or 0
    info = {
        "hostname": socket.gethostname(),
        "cpu_count": str(os.cpu_count() or 0),
        "cpu_usable": str(usable),
        "platform": platform.platform(),
        "cuda_available": UNKNOWN,
        "cuda_device": "none",
        "cuda_version": "none",
    }
    try:
        import torch
    except Exception:  # a broken torch install must not stop logging
        return info
    available = bool(torch.cuda.is_available())
    info["cuda_available"] = "true" if available else "false"
    info["cuda_version"] = str(torch.version.cuda or "none")
    if available:
        try:
            info["cuda_device"] = torch.cuda.get_device_name(0)
        except Exception:
            info["cuda_device"] = UNKNOWN
    return info

"""nox sessions: one ``reproduce-<paper>`` per paper (the main job), tests, smoke, lint, ui, report, demo.

Every session installs distrepro into its own virtualenv with uv (the ``reproduce-<paper>`` sessions share
one, ``.nox/reproduce``: each runs ``nox -s reproduce -- <paper>``, so five papers cost one ~1 GB install)
(about 5 s on a warm cache; pip
takes minutes here), at the versions pinned in ``uv.lock``: ``uv export --locked`` turns the lock into
pip constraints, so a session fails if pyproject.toml and the lock disagree, and gets the same versions on
every machine. Constraints, not ``uv sync``: the lock pins ``torch==2.13.0``, which the local CPU wheel
(``2.13.0+cpu``, found through ``PIP_FIND_LINKS``/``UV_FIND_LINKS``) or a CUDA build installed first
satisfies, whereas syncing the lock would fetch PyPI's CUDA build and its ~3 GB of NVIDIA wheels.
Packages are installed with compiled bytecode (``--compile-bytecode``): with ``PYTHONDONTWRITEBYTECODE``
set, as in many CI and container images, every process would otherwise compile torch again (~6 s CPU).
uv compiles only what lands in site-packages, not the editable checkout, so the session then compiles
``distrepro/``, ``methods/`` and ``datasets/`` too (:data:`SOURCE_DIRS`; ~150 modules a ``distrepro run``
would otherwise compile at every start, and every pool worker and test subprocess with it).

This file imports only the standard library and nox: a new user has nothing but Python, ``uv`` and
``nox`` (``pip install uv nox``, pipx or ``uv tool``), so anything else would fail before the first
session starts. What needs the project's own dependencies (reading ``paper.yaml`` with its schema)
runs inside a session's virtualenv, through ``distrepro``.
"""

from __future__ import annotations

import itertools
import os
import re
import subprocess
import sys
from pathlib import Path

import nox

nox.options.default_venv_backend = "uv"
nox.options.reuse_existing_virtualenvs = True
nox.options.sessions = ["lint", "tests"]

ROOT = Path(__file__).parent
PYTHON = "3.11"


def _find_links() -> str | None:
    """Where the local torch wheel lives: UV_FIND_LINKS, PIP_FIND_LINKS, else pip's own config.

    uv does not read pip.conf; without this a machine whose find-links is set only there would
    resolve ``torch==2.13.0`` to the multi-GB CUDA build from the index.
    """
    links = os.environ.get("UV_FIND_LINKS") or os.environ.get("PIP_FIND_LINKS")
    if links:
        return links
    try:
        out = subprocess.run(
            [sys.executable, "-m", "pip", "config", "get", "global.find-links"],
            capture_output=True,
            text=True,
            timeout=30,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip().splitlines()[0] if out.returncode == 0 and out.stdout.strip() else None


def _constraints(session: nox.Session) -> list[str]:
    """``-c FILE``: uv.lock's versions as pip constraints (every extra and group, no hashes: a local torch build's
    hash is not PyPI's). ``--locked`` makes a lock that no longer matches pyproject.toml an error."""
    out = Path(session.create_tmp()) / "constraints.txt"
    export = ["uv", "export", "--locked", "--no-hashes", "--no-emit-project", "--all-extras", "--all-groups"]
    session.run_install(*export, "--quiet", "-o", str(out), external=True, silent=True)
    return ["-c", str(out)]


def _install(session: nox.Session, extras: str = "test", groups: tuple[str, ...] = ()) -> None:
    links = _find_links()
    args = ["--compile-bytecode", *_constraints(session), *(["--find-links", links] if links else [])]
    for group in groups:
        args += ["--group", f"pyproject.toml:{group}"]
    session.install(*args, "-e", f".[{extras}]")
    # the editable source's bytecode (__pycache__/ is ignored by git); stale files are recompiled when edited
    session.run("python", "-m", "compileall", "-q", *SOURCE_DIRS, silent=True)


#: the checkout's own Python packages, compiled after an editable install (uv compiles site-packages only)
SOURCE_DIRS = ("distrepro", "methods", "datasets")


def _env() -> dict[str, str]:
    """Telemetry off; OMP_NUM_THREADS only when the user set it (torch threads otherwise follow the CPUs this
    process may use: distrepro.engine.torch_threads)."""
    env = {"MLFLOW_DISABLE_TELEMETRY": "true"}
    if os.environ.get("OMP_NUM_THREADS"):
        env["OMP_NUM_THREADS"] = os.environ["OMP_NUM_THREADS"]
    return env


#: two workers, each test file on one of them (``--dist loadfile``): a module-scoped fixture (the hostile-input
#: table's 49 commands, a tracking server, a Ray cluster, a report built once) then runs once, not once per worker
#: that happens to draw one of the module's tests, as ``--dist load`` (xdist's default) had it
XDIST = ("-n", "2", "--dist", "loadfile")


@nox.session(python=PYTHON)
def tests(session: nox.Session) -> None:
    """The full test suite (what CI runs): everything except `slow` and `gpu` tests."""
    # the executor tests run campaigns on a real Ray and through submitit; dev: the guide's mypy line
    # (tests/plugins/test_writing_a_method_doc.py runs it as a plugin author would, after pip install 'distrepro[dev]')
    _install(session, "test,dev,ray,slurm")
    args = session.posargs or ["-m", "not slow and not gpu", *XDIST]
    session.run("pytest", *args, env=_env())


@nox.session(python=PYTHON)
def smoke(session: nox.Session) -> None:
    """Fast end-to-end checks (pytest -m smoke), under two minutes."""
    _install(session)
    session.run("pytest", "-m", "smoke", *session.posargs, env=_env())


@nox.session(python=PYTHON)
def lint(session: nox.Session) -> None:
    """ruff check and format check, mypy over distrepro/ ([tool.mypy] in pyproject.toml) and over the shipped
    plugins in methods/ (each folder a package as the registry imports it, ``from . import solver`` resolved
    with ``--explicit-package-bases``), then the import rules:
    the layer contracts ([tool.importlinter]) and tools/check_imports.py (plugins import only ``distrepro.api``,
    no import cycle, unique module names).

    mypy needs the project installed: torch's, numpy's and pandas' own annotations are part of what
    it checks distrepro/ against. The tools come from the ``dev`` dependency group.
    """
    _install(session, groups=("dev",))
    session.run("ruff", "check", ".")
    session.run("ruff", "format", "--check", ".")
    session.run("mypy", env=_env())
    session.run("mypy", "--explicit-package-bases", "methods", env=_env())
    session.run("lint-imports")
    session.run("python", "tools/check_imports.py")


@nox.session(python=PYTHON)
def demo(session: nox.Session) -> None:
    """The quickstart: AR-SGD on a 4-worker heterogeneous cluster, logged to ./mlflow.db."""
    _install(session)
    session.run("distrepro", "run", "configs/quickstart.yaml", *session.posargs, env=_env())


@nox.session(python=PYTHON)
def ui(session: nox.Session) -> None:
    """The MLflow UI over ./mlflow.db (or MLFLOW_TRACKING_URI) on http://127.0.0.1:5000, through ``distrepro ui``,
    which prints the address of each paper's runs table; nox -s ui -- --port N (or --store URI, --host H)."""
    _install(session)
    session.run("distrepro", "ui", *session.posargs, env=_env())


@nox.session(python=PYTHON)
def report(session: nox.Session) -> None:
    """A paper's claims verdicts and report from MLflow: nox -s report -- <paper> [--campaign RUN_ID] [--out DIR]."""
    _install(session)
    if not session.posargs:
        session.error("name the paper: nox -s report -- <paper> [--campaign RUN_ID] [--out DIR]")
    session.run("distrepro", "report", *session.posargs, env=_env())


_TOP_KEY = re.compile(r"^(?P<key>[A-Za-z_]+):\s*(?P<value>.*?)\s*(?:#.*)?$")
_NESTED_KEY = re.compile(r"^\s+(?P<key>[A-Za-z_]+):\s*(?P<value>.*?)\s*$")


def _scalar(text: str) -> str:
    return text.strip().strip("\"'")


def _paper_header(path: Path) -> dict[str, str]:
    """``kind``, ``citation.id`` and ``citation.title`` of a paper.yaml, read without a YAML parser.

    Only these three keys are needed to name the sessions, and the noxfile may not import PyYAML
    (see the module docstring). They sit at fixed places in every paper.yaml (top-level ``kind:``,
    block ``citation:`` with plain ``id:``/``title:`` lines); ``tests/test_noxfile.py`` checks the
    scan against the real YAML parse of every shipped file.
    """
    header: dict[str, str] = {}
    section = None
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        top = _TOP_KEY.match(line)
        if top:
            section = top["key"]
            if section == "kind":
                header["kind"] = _scalar(top["value"])
            continue
        nested = _NESTED_KEY.match(line)
        if section == "citation" and nested and nested["key"] in ("id", "title") and nested["key"] not in header:
            header[nested["key"]] = _scalar(nested["value"])
    return header


def _papers() -> dict[str, str]:
    """paper id -> title, for every ``methods/*/paper.yaml`` that says ``kind: reproduction``.

    Folders starting with ``_`` are not plugins (``methods/_template``), as in ``distrepro.plugins.registry``.
    """
    papers: dict[str, str] = {}
    for path in sorted(ROOT.glob("methods/*/paper.yaml")):
        if path.parent.name.startswith(("_", ".")):
            continue
        header = _paper_header(path)
        if header.get("kind") == "reproduction" and header.get("id"):
            papers[header["id"]] = header.get("title", header["id"])
    return papers


def _requested_arms(posargs: list[str]) -> list[str]:
    """Arm names given to ``--arms``/``--with`` (``--with a,b`` or ``--with=a,b``)."""
    names: list[str] = []
    for i, arg in enumerate(posargs):
        for flag in ("--arms", "--with"):
            if arg == flag and i + 1 < len(posargs):
                names += posargs[i + 1].split(",")
            elif arg.startswith(flag + "="):
                names += arg.split("=", 1)[1].split(",")
    return sorted({n.strip() for n in names if n.strip()})


def _executor_extra(posargs: list[str]) -> list[str]:
    """The pip extra of ``--executor ray|slurm`` (``--executor X`` or ``--executor=X``), if any."""
    for i, arg in enumerate(posargs):
        value = posargs[i + 1] if arg == "--executor" and i + 1 < len(posargs) else None
        if arg.startswith("--executor="):
            value = arg.split("=", 1)[1]
        if value in ("ray", "slurm"):
            return [value]
    return []


@nox.session(python=PYTHON)
def reproduce(session: nox.Session) -> None:
    """Reproduce a paper: nox -s reproduce -- <paper> [distrepro reproduce options]. Every reproduce-<paper>
    session runs this one, so all papers share one virtualenv (.nox/reproduce: ~1 GB, created once)."""
    if not session.posargs or session.posargs[0].startswith("-"):
        session.error("name the paper: nox -s reproduce -- <paper> [options], or nox -s reproduce-<paper>")
    paper, *args = session.posargs
    mid = "--scale=mid" in args or any(a == "--scale" and b == "mid" for a, b in itertools.pairwise(args))
    _install(session, "test,mnist1d" if mid else "test")  # the mid scale trains on MNIST-1D (the mnist1d extra)
    arms = _requested_arms(args)
    extras = _executor_extra(args)
    if arms:  # an optional arm may need a pip extra; paper.yaml says which (read by distrepro itself)
        out = session.run("distrepro", "extras", paper, *arms, silent=True, env=_env())
        extras += [e for e in (out or "").split() if e]
    if extras:
        _install(session, ",".join(["test", *extras]))
    session.run("distrepro", "reproduce", paper, *args, env=_env())


def _make_reproduce(paper: str, title: str):
    def reproduce_paper(session: nox.Session) -> None:
        # no virtualenv of its own: the shared session's, through a nested nox (this file, same interpreter)
        session.run(
            sys.executable, "-m", "nox", "-f", str(ROOT / "noxfile.py"), "-s", "reproduce", "--", paper,
            *session.posargs, external=True,
        )  # fmt: skip

    reproduce_paper.__doc__ = f"Reproduce {title} (the main job: every arm, every seed, then the report)."
    return reproduce_paper


for _paper, _title in _papers().items():
    nox.session(python=PYTHON, name=f"reproduce-{_paper}", venv_backend="none")(_make_reproduce(_paper, _title))

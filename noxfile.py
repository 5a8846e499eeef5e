"""nox sessions: tests, smoke, lint, ui, report, and one ``reproduce-<paper>`` per paper.

Every session installs distrepro into its own virtualenv with uv (about 5 s on a warm cache; pip
takes minutes here). ``torch==2.13.0`` resolves to the local CPU wheel when ``PIP_FIND_LINKS`` (or
``UV_FIND_LINKS``) points at a folder holding it; users with CUDA install their own torch build
first, or point ``UV_FIND_LINKS`` at their wheel folder.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import nox
import yaml

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


def _install(session: nox.Session, extras: str = "test") -> None:
    links = _find_links()
    args = ["--find-links", links] if links else []
    session.install(*args, "-e", f".[{extras}]")


def _env() -> dict[str, str]:
    return {"MLFLOW_DISABLE_TELEMETRY": "true", "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "2")}


@nox.session(python=PYTHON)
def tests(session: nox.Session) -> None:
    """The full test suite (what CI runs): everything except `slow` and `gpu` tests."""
    _install(session)
    args = session.posargs or ["-m", "not slow and not gpu", "-n", "2"]
    session.run("pytest", *args, env=_env())


@nox.session(python=PYTHON)
def smoke(session: nox.Session) -> None:
    """Fast end-to-end checks (pytest -m smoke), under two minutes."""
    _install(session)
    session.run("pytest", "-m", "smoke", *session.posargs, env=_env())


@nox.session(python=PYTHON)
def lint(session: nox.Session) -> None:
    """ruff check and format check."""
    session.install("ruff")
    session.run("ruff", "check", ".")
    session.run("ruff", "format", "--check", ".")


@nox.session(python=PYTHON)
def demo(session: nox.Session) -> None:
    """The quickstart: AR-SGD on a 4-worker heterogeneous cluster, logged to ./mlflow.db."""
    _install(session)
    session.run("distrepro", "run", "configs/quickstart.yaml", *session.posargs, env=_env())


@nox.session(python=PYTHON)
def ui(session: nox.Session) -> None:
    """The MLflow UI on http://127.0.0.1:5000 over ./mlflow.db (or MLFLOW_TRACKING_URI)."""
    _install(session)
    uri = os.environ.get("MLFLOW_TRACKING_URI", f"sqlite:///{ROOT / 'mlflow.db'}")
    session.run(
        "mlflow",
        "ui",
        "--host",
        "127.0.0.1",
        "--port",
        "5000",
        "--workers",
        "1",
        "--backend-store-uri",
        uri,
        *session.posargs,
        env={**_env(), "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"},
    )


@nox.session(python=PYTHON)
def report(session: nox.Session) -> None:
    """A paper's claims verdicts and report from MLflow: nox -s report -- <paper> [--campaign RUN_ID] [--out DIR]."""
    _install(session)
    if not session.posargs:
        session.error("name the paper: nox -s report -- <paper> [--campaign RUN_ID] [--out DIR]")
    session.run("distrepro", "report", *session.posargs, env=_env())


def _papers() -> dict[str, dict]:
    """paper id -> its paper.yaml, for every method folder whose paper.yaml says kind: reproduction."""
    papers: dict[str, dict] = {}
    for path in sorted(ROOT.glob("methods/*/paper.yaml")):
        data = yaml.safe_load(path.read_text()) or {}
        if data.get("kind") == "reproduction":
            cite = data.get("citation") or {}
            if cite.get("id"):
                papers[cite["id"]] = data
    return papers


def _requested_arms(posargs: list[str]) -> set[str]:
    """Arm names given to ``--arms``/``--with`` (``--with a,b`` or ``--with=a,b``)."""
    names: set[str] = set()
    for i, arg in enumerate(posargs):
        for flag in ("--arms", "--with"):
            if arg == flag and i + 1 < len(posargs):
                names.update(posargs[i + 1].split(","))
            elif arg.startswith(flag + "="):
                names.update(arg.split("=", 1)[1].split(","))
    return {n.strip() for n in names}


def _extras(paper: dict, posargs: list[str]) -> str:
    """The pip extras to install: ``test`` plus the ``extra`` of every optional arm asked for."""
    arms = (paper.get("setup") or {}).get("arms") or {}
    wanted = _requested_arms(posargs)
    extras = {arm["extra"] for name, arm in arms.items() if name in wanted and (arm or {}).get("extra")}
    return ",".join(["test", *sorted(extras)])


def _make_reproduce(paper: str, data: dict):
    def reproduce(session: nox.Session) -> None:
        _install(session, _extras(data, session.posargs))
        session.run("distrepro", "reproduce", paper, *session.posargs, env=_env())

    title = (data.get("citation") or {}).get("title", paper)
    reproduce.__doc__ = f"Reproduce {title}."
    return reproduce


for _paper, _data in _papers().items():
    nox.session(python=PYTHON, name=f"reproduce-{_paper}")(_make_reproduce(_paper, _data))

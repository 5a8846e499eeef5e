"""Shared fixtures: a private, pre-migrated MLflow store per test; few threads per process; test
profiles and plugins that started engine processes can find."""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Callable, Generator
from importlib import metadata
from pathlib import Path

import pytest

# Idle OpenMP threads sleep instead of spinning: torch's second intra-op thread otherwise busy-waits between the
# small ops of the tests' tiny models, doubling their CPU time (and taking a shared core from the neighbours)
# without changing a result. libgomp reads it once, as torch loads it, so it is set before torch is imported; the
# commands and ranks the tests start inherit it.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
# campaigns train in the test process (--jobs 1) unless a test names an executor: many tests patch this process
os.environ.setdefault("DISTREPRO_JOBS", "1")

REPO = Path(__file__).resolve().parents[1]
# helpers shared by test modules (``from clirun import ...``): tests/ mirrors the package, helpers live apart
sys.path.insert(0, str(Path(__file__).resolve().parent / "_support"))

from hang_guard import load_factor  # noqa: E402  (lives in _support, on the path just added)

# pytest keeps each test module's assertion-rewritten bytecode in its __pycache__ (git ignores it) and reads it back
# on the next run, unless bytecode writing is off: with PYTHONDONTWRITEBYTECODE set (as in many CI and container
# images, and nox inherits it) every test process rewrote and compiled all 200-odd test modules at every run, about
# 5 s of CPU per xdist worker (both collect the whole suite). Only this process writes: the processes the tests
# start inherit the environment unchanged. The editable source's own bytecode is the nox session's (noxfile.py).
sys.dont_write_bytecode = False

PAIR_PROFILE = """\
schema_version: 1
name: pair-2
description: two workers, the second at half speed
nodes:
  - name: a
    devices:
      - {name: fast, kind: gpu, count: 1, memory_gib: 24, effective_flops_per_s: 1.0e13, source: "[E] test"}
  - name: b
    devices:
      - {name: slow, kind: gpu, count: 1, memory_gib: 24, effective_flops_per_s: 5.0e12, source: "[E] test"}
network:
  intra_node: {latency_us: 15, bandwidth_gbytes_per_s: 8, source: "[E] test"}
  inter_node: {latency_us: 80, bandwidth_gbytes_per_s: 1.1, source: "[E] test"}
"""


#: the environment that decides which plugins a process sees; ``main([..., "--root", r])`` exports ``--root`` for
#: the ranks it starts, which in a test process would leak a deleted temporary root into every later test
PLUGIN_ENV = ("DISTREPRO_PATH", "DISTREPRO_ROOT", "DISTREPRO_PROFILES_DIR")


def pytest_configure(config: pytest.Config) -> None:
    """At most two torch threads in a process that runs tests, set before any test module is imported. Not in
    pytest-xdist's controller, which runs none: importing torch there cost about 1.6 s of CPU for nothing."""
    if getattr(config.option, "numprocesses", None) and not hasattr(config, "workerinput"):
        return
    import torch  # after OMP_WAIT_POLICY (above), which its OpenMP reads as it loads

    torch.set_num_threads(min(2, torch.get_num_threads()))


@pytest.fixture(autouse=True)
def _plugin_env_restored() -> Generator[None, None, None]:
    """Each test ends with the plugin environment it started with (``monkeypatch.delenv`` of an unset variable
    records nothing, so it cannot undo a variable the code under test sets later)."""
    before = {name: os.environ.get(name) for name in PLUGIN_ENV}
    yield
    for name, value in before.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value


@pytest.fixture
def profiles(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A profiles folder with ``pair-2`` (above) and the repository's ``hetero-2fast-2slow``."""
    folder = tmp_path / "profiles"
    folder.mkdir()
    (folder / "pair-2.yaml").write_text(PAIR_PROFILE)
    for f in ("hetero-2fast-2slow.yaml", "workloads.yaml"):
        shutil.copy(REPO / "hardware_profiles" / f, folder / f)
    monkeypatch.setenv("DISTREPRO_PROFILES_DIR", str(folder))
    return folder


@pytest.fixture
def with_test_plugins(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Callable[..., Path]:
    """``with_test_plugins("name", ...)``: a ``DISTREPRO_ROOT`` holding the repository's methods plus
    these methods of ``tests/_support/plugins``, so that every process a run starts finds them by name."""

    def make(*names: str) -> Path:
        root = tmp_path / "root"
        (root / "methods").mkdir(parents=True)
        for method in [
            *(REPO / "methods").iterdir(),
            *(REPO / "tests" / "_support" / "plugins" / "methods" / n for n in names),
        ]:
            if (method / "method.py").is_file():
                os.symlink(method, root / "methods" / method.name)
        for folder in ("datasets", "hardware_profiles"):
            os.symlink(REPO / folder, root / folder)
        monkeypatch.setenv("DISTREPRO_ROOT", str(root))
        return root

    return make


@pytest.fixture(autouse=True, scope="session")
def _ranks_forked_from_a_zygote() -> Generator[None, None, None]:
    """The dist engine's ranks, started by an engine in this process, are forked from a process that imported torch
    and distrepro once (``tests/_support/cli_zygote.py``: each rank still a process of its own, in a session of
    its own, with the launcher's environment, folder and fds, running ``python -m`` of the worker module): a rank
    spent about 3 s of CPU importing before it trained a few steps. The ranks of a command forked from a zygote are
    forked by that zygote; those of a fresh command, and torchrun's, are fresh processes."""
    import cli_zygote

    from distrepro.engine.multiprocess import launch

    own = launch.subprocess
    forking = cli_zygote.ForkingSubprocess(cli_zygote.RANK_MODULES)
    launch.subprocess = forking  # type: ignore[assignment]
    yield
    launch.subprocess = own


@pytest.fixture(scope="session")
def migrated_mlflow_db(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An empty, fully migrated sqlite store, built once and kept in pytest's cache between sessions (without the
    cache, ``-p no:cacheprovider``: in the run's temporary folder, which pytest-xdist's workers share).

    Migrating a new store takes about 3 s of CPU (more on a busy machine); copying one takes milliseconds.
    Keyed by the MLflow version (a new version may add migrations), built in a private file and
    moved into place atomically, under a lock: one xdist worker builds it, the other waits and copies it.
    """
    import fcntl

    from distrepro.tracking.mlflow_client import make_client

    cache = getattr(request.config, "cache", None)
    name = f"mlflow-template-{metadata.version('mlflow')}"
    if cache is not None:
        folder = Path(cache.mkdir(name))
    else:  # an xdist worker's temporary folder is popen-gwN in the run's
        run = tmp_path_factory.getbasetemp()
        folder = (run.parent if hasattr(request.config, "workerinput") else run) / name
        folder.mkdir(exist_ok=True)
    db = folder / "template.db"
    with (folder / "lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not db.exists():
            scratch = tmp_path_factory.mktemp("mlflow_build") / "template.db"
            make_client(f"sqlite:///{scratch}").search_experiments()  # creates and migrates the tables
            os.replace(shutil.copyfile(scratch, folder / f"template.{os.getpid()}.tmp"), db)
    return db


@pytest.fixture
def mlflow_uri(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, migrated_mlflow_db: Path) -> str:
    """A fresh, pre-migrated sqlite tracking store in this test's tmp dir (never the cwd's mlflow.db)."""
    db = tmp_path / "mlflow.db"
    shutil.copyfile(migrated_mlflow_db, db)
    uri = f"sqlite:///{db}"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    return uri


@pytest.hookimpl(hookwrapper=True, tryfirst=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Generator[None, None, None]:
    """Stretch the test's pytest-timeout limit (its marker, else ``--timeout``/the ini's) by the load now.

    The limit ends a hung test; on a loaded machine a correct test is only slower (``hang_guard``'s module says
    why). The stretched limit is prepended as the test's closest marker, which pytest-timeout reads next.
    """
    marker = item.get_closest_marker("timeout")
    if marker is not None and marker.args:
        base = float(marker.args[0])
    elif marker is not None and "timeout" in marker.kwargs:
        base = float(marker.kwargs["timeout"])
    else:
        option = item.config.getoption("timeout", None)
        base = float(option if option is not None else (item.config.getini("timeout") or 0))
    if base > 0:
        rest = {k: v for k, v in (marker.kwargs if marker is not None else {}).items() if k != "timeout"}
        item.add_marker(pytest.mark.timeout(base * load_factor(), **rest), append=False)
    yield

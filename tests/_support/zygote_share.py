"""Zygotes shared by the test processes of one pytest-xdist run: the first process that needs a zygote for a start-up
environment starts it for the run; the others fork from it instead of importing torch, MLflow and distrepro again
(about 5 s of CPU a zygote: :mod:`cli_zygote` says what a zygote is and why its processes are the ones ``python -m``
starts). The workers of one run share their start-up environment but for what :data:`cli_zygote.READ_LATER` covers
(``PYTEST_XDIST_WORKER``), so their zygotes were the same ones, started once per worker.

How: the run's zygotes live in a folder named after the run (``PYTEST_XDIST_TESTRUNUID``, which every worker of the
run has), one folder each, named after the :func:`cli_zygote.startup_key` of its environment, holding its socket and a
FIFO that is the zygote's stdin. Each test process that uses the zygote holds the FIFO open for writing until it
ends; the zygote ends (and removes its folder) once no process holds it, so it outlives the process that started it
as long as another still uses it. A lock on the run's folder orders the lookups. A zygote that ends just as a process
asks it makes that process start its own (:func:`cli_zygote.popen_module`). Outside pytest-xdist nothing is shared.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import re
import shutil
import tempfile
from collections.abc import Iterator, Mapping
from pathlib import Path

import cli_zygote

#: set by pytest-xdist in each worker: the same for every worker of one run
RUN_ENV = "PYTEST_XDIST_TESTRUNUID"
#: the characters of a start-up key that name a zygote's folder, and the longest socket path AF_UNIX takes
KEY_CHARS = 16
SOCKET_PATH_MAX = 107
#: the FIFO each user holds open for writing (open for reading as the zygote's stdin)
_HOLDS: list[int] = []


def run_folder() -> Path | None:
    """The folder of this run's zygotes; None outside a pytest-xdist run."""
    run = os.environ.get(RUN_ENV, "")
    if not re.fullmatch(r"[0-9A-Za-z_-]{1,64}", run):
        return None
    # short: a socket's path must fit AF_UNIX's 108 bytes under TMPDIR (nox sets one inside the checkout)
    return Path(tempfile.gettempdir()) / f"dz{os.getuid()}-{run[:16]}"


@contextlib.contextmanager
def locked(folder: Path) -> Iterator[None]:
    """``folder``, made if need be, locked by this process (the last zygote of the run removes it under the lock)."""
    while True:
        folder.mkdir(mode=0o700, exist_ok=True)
        try:
            fd = os.open(folder, os.O_RDONLY)
        except FileNotFoundError:
            continue  # removed as it was made
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            if folder.exists() and os.path.samestat(os.fstat(fd), os.stat(folder)):
                yield
                return
        finally:
            os.close(fd)


def zygote_of_the_run(env: Mapping[str, str]) -> cli_zygote.Zygote | cli_zygote.ZygoteAt | None:
    """The run's zygote for the start-up part of ``env``: joined if another test process started it, else started
    here for the run; None outside a pytest-xdist run."""
    run = run_folder()
    if run is None:
        return None
    if len(str(run / ("k" * KEY_CHARS) / "socket").encode()) > SOCKET_PATH_MAX:
        return None  # a TMPDIR too deep for a socket: each test process starts its own, as outside xdist
    with locked(run):
        folder = run / cli_zygote.startup_key(env)[:KEY_CHARS]
        fifo = folder / "stdin"
        if (folder / "socket").exists():
            try:
                _HOLDS.append(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))  # fails once the zygote has closed it
                return cli_zygote.ZygoteAt(str(folder / "socket"), shared=True)
            except OSError as exc:
                if exc.errno not in (errno.ENXIO, errno.ENOENT):
                    raise
        shutil.rmtree(folder, ignore_errors=True)  # what a zygote that ended, or failed to start, left
        folder.mkdir()
        os.mkfifo(fifo, 0o600)
        hold = os.open(fifo, os.O_RDWR)  # this process's hold (opening it so never blocks)
        stdin = os.open(fifo, os.O_RDONLY)
        try:
            zygote = cli_zygote.Zygote(env, folder=folder, stdin=stdin)
        except OSError:  # not shared, then: the caller starts one of its own
            os.close(hold)
            shutil.rmtree(folder, ignore_errors=True)
            return None
        finally:
            os.close(stdin)
        _HOLDS.append(hold)
        return zygote

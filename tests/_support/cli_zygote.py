"""``distrepro`` command lines as processes forked from one that imported the command line once: a test that runs the
CLI as a user does pays torch's, MLflow's and pydantic's imports once per test process instead of once per command.

Why: ``python -m distrepro.cli`` spends about 2 s of CPU importing before it decides anything, and a ``run`` about
3.5 s more in its watched child; the hostile-input table alone (58 command lines) spent 150 s of CPU, nearly all of
it importing the same modules.

Why a forked command is still the user's process, not ``main()`` in the test: each command is a process of its own
(its own pid, which the test may signal, its own exit status, environment, working folder, and the test's pipes or
files as fds 0-2) that runs ``distrepro.cli.console.console`` with the command's ``sys.argv`` and ``python -m``'s
path, as the console script does, and ends as Python ends a process (non-daemon threads joined, exit handlers run,
stdout and stderr flushed; only the tear-down of the modules, which prints nothing, is skipped). A ``run`` or
``reproduce`` goes through the real watcher, :func:`distrepro.cli.watch.run_watched`: only the watched child it
starts is forked from the watcher instead of a fresh interpreter, and that child executes the watcher's own ``-c``
program (``watch._CHILD``) with the environment, path entry and arguments the watcher passed, so the notes file, the
death signal, the parent check and the exit status take their real paths.

What is shared is only what importing ``zygote_server.PRELOAD`` made, imported by the zygote in an empty folder with
the environment of the first command (a fresh process imports the same modules from the same files): what those
imports printed is written again to each command's stdout and stderr, and what they put in ``os.environ`` is set
again (``setdefault``) in each command's environment. A command whose environment differs from the zygote's in anything
read at start-up (``PYTHON*``, locale, thread counts, ``HOME``: everything but :data:`READ_LATER`) runs as a fresh
subprocess instead. Also shared: the hash seed and NumPy's global random state (distrepro seeds what it uses).

Not for tests about the watcher itself or a process that ends without Python's exit (``tests/cli/test_watch.py``,
and the ``os._exit``, full-disk and closed-pipe cases of ``tests/test_hostile_inputs.py``, start fresh subprocesses).

This module is the test's side; :mod:`zygote_server` is the zygote's.
"""

from __future__ import annotations

import array
import atexit
import io
import json
import locale
import os
import selectors
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

SUPPORT = Path(__file__).resolve().parent
#: started as ``python -c`` (no ``__main__`` file for multiprocessing's spawn to re-import, as under ``python -m``)
_BOOT = (
    "import os, sys; sys.path.insert(0, sys.argv.pop(1)); import zygote_server; "
    "zygote_server.serve(int(sys.argv[1])); os._exit(0)"
)
#: variables read when used, never while ``zygote_server.PRELOAD`` is imported: a command may differ from the
#: zygote's environment in these and still be forked
READ_LATER = ("DISTREPRO_", "PYTEST_", "MLFLOW_")
#: MLflow's read as it is imported (its loggers)
_READ_AT_IMPORT = ("MLFLOW_CONFIGURE_LOGGING", "MLFLOW_LOGGING_LEVEL")


def _startup_part(env: Mapping[str, str]) -> dict[str, str]:
    return {k: v for k, v in env.items() if k in _READ_AT_IMPORT or not k.startswith(READ_LATER)}


# ---------------------------------------------------------------------- the test's side


class Forked:
    """A command forked by the zygote, as much of ``subprocess.Popen`` as the tests use; ``cpu_s`` is its user +
    system CPU time (its watched child included) once it has ended."""

    def __init__(self, args: list[str], conn: socket.socket, pid: int, pipes: dict[str, int]) -> None:
        self.args, self.pid, self._conn = args, pid, conn
        self.returncode: int | None = None
        self.cpu_s = 0.0
        self._pipes = pipes  # "out"/"err" -> read end
        self._chunks: dict[str, list[bytes]] = {name: [] for name in pipes}
        self._reply = b""

    def poll(self) -> int | None:
        self._pump(0.0, pipes=False)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if not self._pump(timeout, pipes=False):
            raise subprocess.TimeoutExpired(self.args, timeout or 0.0)
        assert self.returncode is not None
        return self.returncode

    def communicate(self, timeout: float | None = None) -> tuple[str | None, str | None]:
        """Everything the command wrote to its pipes, once it has ended; a timeout leaves what was read so far
        for the next call, as ``Popen.communicate`` does."""
        if not self._pump(timeout, pipes=True):
            raise subprocess.TimeoutExpired(self.args, timeout or 0.0)
        return self._text("out"), self._text("err")

    def send_signal(self, signum: int) -> None:
        if self.poll() is None:  # not reaped yet (the zygote reaps and then tells): the pid is still the command's
            os.kill(self.pid, signum)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def _text(self, name: str) -> str | None:
        if name not in self._chunks:
            return None
        raw = io.BytesIO(b"".join(self._chunks[name]))
        return io.TextIOWrapper(raw, encoding=locale.getpreferredencoding(False)).read()  # universal newlines

    def _pump(self, timeout: float | None, pipes: bool) -> bool:
        """Read the end message, and the pipes if ``pipes``, until all are done (True) or ``timeout`` passes."""
        deadline = None if timeout is None else time.monotonic() + timeout
        sel = selectors.DefaultSelector()
        try:
            if self.returncode is None:
                sel.register(self._conn, selectors.EVENT_READ, "end")
            for name, fd in self._pipes.items() if pipes else ():
                sel.register(fd, selectors.EVENT_READ, name)
            while sel.get_map():
                events = sel.select(None if deadline is None else max(0.0, deadline - time.monotonic()))
                if not events:
                    return False
                for key, _ in events:
                    if key.data == "end":
                        data = self._conn.recv(65536)
                        self._reply += data
                        if data and not self._reply.endswith(b"\n"):
                            continue
                        sel.unregister(key.fileobj)
                        self._ended(self._reply)
                        continue
                    data = os.read(key.fd, 65536)
                    if data:
                        self._chunks[key.data].append(data)
                        continue
                    sel.unregister(key.fileobj)
                    os.close(key.fd)
                    del self._pipes[key.data]
            return True
        finally:
            sel.close()

    def _ended(self, reply: bytes) -> None:
        self._conn.close()
        if not reply:
            raise RuntimeError(f"the zygote went away while {self.args} ran")
        end = json.loads(reply)
        self.returncode, self.cpu_s = end["rc"], end["cpu_s"]


class Zygote:
    """The zygote process, started with ``env``: it imports ``zygote_server.PRELOAD``, then forks a command per
    request."""

    def __init__(self, env: Mapping[str, str]) -> None:
        self.startup = _startup_part(env)
        self._folder = Path(tempfile.mkdtemp(prefix="cli-zygote-"))
        self._path = str(self._folder / "socket")
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        listener.bind(self._path)
        listener.listen(64)
        self._log = (self._folder / "zygote.log").open("wb")
        self._proc = subprocess.Popen(
            [sys.executable, "-c", _BOOT, str(SUPPORT), str(listener.fileno())],
            env=dict(env),
            cwd=self._folder,  # nothing to import from: a command's working folder comes first on its own path
            stdin=subprocess.PIPE,  # the zygote ends when this closes (this process ended)
            stdout=self._log,
            stderr=self._log,
            pass_fds=[listener.fileno()],
        )
        listener.close()

    def popen(
        self, argv: list[str], cwd: Path | str, env: Mapping[str, str], stdout: Any = None, stderr: Any = None
    ) -> Forked:
        """``distrepro *argv`` in ``cwd`` with ``env``; ``stdout``/``stderr``: ``subprocess.PIPE``, an open file, or
        None (this process's own, as a subprocess inherits them)."""
        fds: list[int] = []
        pipes: dict[str, int] = {}
        for name, target, own in (("out", stdout, 1), ("err", stderr, 2)):
            if target == subprocess.PIPE:
                read, write = os.pipe()
                pipes[name] = read
                fds.append(write)
            else:
                fds.append(own if target is None else target.fileno())
        request = json.dumps({"argv": list(argv), "cwd": str(cwd), "env": dict(env)}).encode() + b"\n"
        conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            conn.connect(self._path)
            conn.sendmsg([request], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [0, *fds]))])
        finally:
            for name, fd in zip(("out", "err"), fds, strict=True):
                if name in pipes:
                    os.close(fd)  # the command holds its own copy
        started = b""
        while not started.endswith(b"\n"):
            try:
                data = conn.recv(4096)
            except ConnectionResetError:
                data = b""
            if not data:
                self._proc.poll()
                log = (self._folder / "zygote.log").read_text(errors="replace")[-3000:]
                raise RuntimeError(f"the zygote did not start {argv} (exit {self._proc.returncode}):\n{log}")
            started += data
        return Forked(["distrepro", *argv], conn, json.loads(started)["pid"], pipes)

    def close(self) -> None:
        if self._proc.stdin is not None:
            self._proc.stdin.close()
        try:
            self._proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()
        self._log.close()
        shutil.rmtree(self._folder, ignore_errors=True)


_SHARED: list[Zygote] = []
_STARTING = threading.Lock()


def popen(
    argv: list[str], cwd: Path | str, env: Mapping[str, str], stdout: Any = None, stderr: Any = None
) -> Forked | subprocess.Popen[str]:
    """``distrepro *argv`` forked from this test process's zygote (started with the first command's environment),
    or, where ``env`` differs from it in what is read at start-up, as ``python -m distrepro.cli`` (text pipes)."""
    with _STARTING:
        if not _SHARED:
            _SHARED.append(Zygote(env))
            atexit.register(_SHARED[0].close)
    if _startup_part(env) == _SHARED[0].startup:
        return _SHARED[0].popen(argv, cwd, env, stdout, stderr)
    return subprocess.Popen(
        [sys.executable, "-m", "distrepro.cli", *argv], cwd=cwd, env=dict(env), stdout=stdout, stderr=stderr, text=True
    )


def cpu_of(proc: Forked | subprocess.Popen[str], reaped_children_cpu_s: float) -> float:
    """A command's CPU seconds: the zygote's measure for a forked one, else what the caller's reaped children
    gained while it was waited for."""
    return proc.cpu_s if isinstance(proc, Forked) else reaped_children_cpu_s

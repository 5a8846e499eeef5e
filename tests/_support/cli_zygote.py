"""``python -m distrepro.cli`` commands and the dist engine's ranks as processes forked from one that imported torch,
MLflow and distrepro once: a test pays those imports once per test process instead of once per process it starts.

Why: a ``distrepro`` command spends about 2 s of CPU importing before it decides anything (a ``run`` about 3.5 s
more in its watched child), and a dist-engine rank about 3 s before it trains its few steps; the hostile-input table
(58 commands) spent 150 s of CPU, the plugins' checkpoint round trips (two ranks, three runs each) 100 s.

Why a forked process is still the one ``python -m MODULE`` starts, not a call in the test: each is a process of its
own (its own pid, which the test or the launcher may signal, its own exit status, a session of its own where
``start_new_session`` asks, the caller's environment, working folder, and pipes or files as fds 0-2) that runs the
module as ``__main__`` the way ``-m`` does (``runpy``, ``python -m``'s path), and ends as Python ends a process
(non-daemon threads joined, exit handlers run, stdout and stderr flushed; only the modules' tear-down, which prints
nothing, is skipped). A ``run`` or ``reproduce`` goes through the real watcher,
:func:`distrepro.cli.watch.run_watched`: only the watched child it starts is forked from the watcher instead of a
fresh interpreter, and that child executes the watcher's own ``-c`` program (``watch._CHILD``) with the environment,
path entry and arguments the watcher passed, so the open-runs file, the death signal, the parent check and the exit
status take their real paths. A rank's parent is the zygote, not the launcher: the launcher polls, waits and signals
it through its pid and this module, as it would a child (it never relies on being the parent).

What is shared is only what importing ``zygote_server.PRELOAD`` made, imported by the zygote in an empty folder with
the environment of the first process asked for (a fresh process imports the same modules from the same files): what
those imports printed is written again to each process's stdout and stderr, and what they put in ``os.environ`` is
set again (``setdefault``). A process whose environment differs from the zygote's in anything read at start-up
(``PYTHON*``, locale, ``OMP_NUM_THREADS``, ``HOME``: everything but :data:`READ_LATER` and :data:`SHELL_NOTES`)
gets a zygote of its own (up to :data:`MAX_ZYGOTES`), else a fresh ``python -m``. Also shared: the hash seed and
NumPy's global random state (distrepro seeds what it uses). ``DISTREPRO_TEST_FRESH_PROCESSES=1`` (:data:`FRESH_ENV`)
starts everything fresh.

Not for tests about the watcher itself, a process that ends without Python's exit, or a fresh interpreter's start:
``tests/cli/test_watch.py``, the ``os._exit``, full-disk and closed-pipe cases of ``tests/test_hostile_inputs.py``,
Ctrl-C and SIGTERM of a command (``tests/orchestration``), the wheel and packaging tests start fresh processes, and
so do torchrun's ranks and those of a fresh command. A forked command's ranks are forked by its own zygote where
their environment's start-up part is the zygote's (``zygote_server._command``), else they start fresh.

This module is the test's side; :mod:`zygote_server` is the zygote's.
"""

from __future__ import annotations

import array
import atexit
import hashlib
import json
import locale
import os
import select
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
    "zygote_server.serve(int(sys.argv[1]), sys.argv[2] == 'kept'); os._exit(0)"
)
#: variables read when used, never while ``zygote_server.PRELOAD`` is imported: a command may differ from the
#: zygote's environment in these and still be forked
READ_LATER = ("DISTREPRO_", "PYTEST_", "MLFLOW_")
#: MLflow's read as it is imported (its loggers)
_READ_AT_IMPORT = ("MLFLOW_CONFIGURE_LOGGING", "MLFLOW_LOGGING_LEVEL")
#: read when used, not while imported, though not under a prefix of :data:`READ_LATER`: what a shell exports to each
#: command it runs (the command's path, its depth, its folder), and torch's compile cache folder (read, and set, as
#: the first compiled kernel is cached: a command that compiled one passes it on to the ranks it starts)
SHELL_NOTES = ("_", "SHLVL", "PWD", "OLDPWD", "TORCHINDUCTOR_CACHE_DIR")


def _startup_part(env: Mapping[str, str]) -> dict[str, str]:
    return {k: v for k, v in env.items() if k in _READ_AT_IMPORT or not (k.startswith(READ_LATER) or k in SHELL_NOTES)}


class Forked:
    """A process forked by the zygote, as much of ``subprocess.Popen`` (text pipes) as the tests and the dist engine's
    launcher use; ``cpu_s`` is its user + system CPU time (its own children's included) once it has ended."""

    def __init__(self, args: list[str], conn: socket.socket, pid: int, pipes: dict[str, int]) -> None:
        self.args, self.pid, self._conn = args, pid, conn
        self.returncode: int | None = None
        self.cpu_s = 0.0
        encoding = locale.getpreferredencoding(False)  # as Popen(text=True): universal newlines too
        self.stdout = open(pipes["out"], encoding=encoding) if "out" in pipes else None  # noqa: SIM115
        self.stderr = open(pipes["err"], encoding=encoding) if "err" in pipes else None  # noqa: SIM115
        self._read: dict[str, tuple[threading.Thread, list[str]]] = {}
        self._reply = b""

    def poll(self) -> int | None:
        self._wait_end(0.0)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if not self._wait_end(timeout):
            raise subprocess.TimeoutExpired(self.args, timeout or 0.0)
        assert self.returncode is not None
        return self.returncode

    def communicate(self, timeout: float | None = None) -> tuple[str | None, str | None]:
        """The rest of what the process writes to its pipes, once it has ended; a timeout keeps reading for the next
        call, as ``Popen.communicate`` does."""
        deadline = None if timeout is None else time.monotonic() + timeout
        for name, stream in (("out", self.stdout), ("err", self.stderr)):
            if stream is not None and name not in self._read:
                box: list[str] = []
                reader = threading.Thread(target=lambda s=stream, b=box: b.append(s.read()), daemon=True)
                reader.start()
                self._read[name] = (reader, box)
        for reader, _ in self._read.values():
            reader.join(None if deadline is None else max(0.0, deadline - time.monotonic()))
            if reader.is_alive():
                raise subprocess.TimeoutExpired(self.args, timeout or 0.0)
        self.wait(None if deadline is None else max(0.0, deadline - time.monotonic()))
        got = {name: box[0] if box else "" for name, (_, box) in self._read.items()}
        return got.get("out"), got.get("err")

    def send_signal(self, signum: int) -> None:
        if self.poll() is None:  # not reaped yet (the zygote reaps, then tells): the pid is still this process's
            os.kill(self.pid, signum)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def _wait_end(self, timeout: float | None) -> bool:
        """Read the zygote's message of this process's end; False if it has not come within ``timeout``."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.returncode is None:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            if not select.select([self._conn], [], [], left)[0]:
                return False
            data = self._conn.recv(65536)
            self._reply += data
            if data and not self._reply.endswith(b"\n"):
                continue
            self._conn.close()
            if not data and not self._reply:
                raise RuntimeError(f"the zygote went away while {self.args} ran")
            end = json.loads(self._reply)
            self.returncode, self.cpu_s = end["rc"], end["cpu_s"]
        return True


def fork_from(socket_path: str, module: str, args: list[str], cwd: Path | str, env: Mapping[str, str], stdout: Any,
              stderr: Any, new_session: bool) -> Forked:  # fmt: skip
    """``python -m module *args`` forked by the zygote listening at ``socket_path`` (:meth:`Zygote.popen`; a process
    forked from a zygote asks its own zygote the same way); ``ConnectionError`` if the zygote started nothing."""
    fds: list[int] = []
    pipes: dict[str, int] = {}
    for name, target, own in (("out", stdout, 1), ("err", stderr, 2)):
        if target == subprocess.PIPE:
            read, write = os.pipe()
            pipes[name] = read
            fds.append(write)
        else:
            fds.append(own if target is None else target.fileno())
    request = {"module": module, "args": list(args), "cwd": str(cwd), "env": dict(env), "new_session": new_session}
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        conn.connect(socket_path)
        data = json.dumps(request).encode() + b"\n"
        conn.sendmsg([data], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [0, *fds]))])
    finally:
        for name, fd in zip(("out", "err"), fds, strict=True):
            if name in pipes:
                os.close(fd)  # the process holds its own copy
    started = b""
    while not started.endswith(b"\n"):
        try:
            data = conn.recv(4096)
        except ConnectionResetError:
            data = b""
        if not data:
            raise ConnectionError(f"the zygote did not start -m {module}")
        started += data
    return Forked([sys.executable, "-m", module, *args], conn, json.loads(started)["pid"], pipes)


class Zygote:
    """The zygote process, started with ``env``: it imports ``zygote_server.PRELOAD``, then forks a process per
    request."""

    def __init__(self, env: Mapping[str, str], folder: Path | None = None, stdin: int | None = None) -> None:
        """``folder`` (else a new temporary one) holds its socket and log; ``stdin``: the fd it reads, ending when
        every writer has closed it (:mod:`zygote_share`: the test processes of a run), else a pipe from this process
        (it ends when this process ends or :meth:`close` is called)."""
        self._folder = Path(tempfile.mkdtemp(prefix="cli-zygote-")) if folder is None else folder
        self._folder.mkdir(exist_ok=True)
        self._kept_by_run = stdin is not None
        self._path = str(self._folder / "socket")
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        listener.bind(self._path)
        listener.listen(64)
        self._log = (self._folder / "zygote.log").open("wb")
        self._proc = subprocess.Popen(
            [sys.executable, "-c", _BOOT, str(SUPPORT), str(listener.fileno()), "kept" if stdin is not None else ""],
            env=dict(env),
            cwd=self._folder,  # nothing to import from: a process's working folder comes first on its own path
            stdin=subprocess.PIPE if stdin is None else stdin,
            stdout=self._log,
            stderr=self._log,
            pass_fds=[listener.fileno()],
        )
        listener.close()

    @property
    def socket_path(self) -> str:
        """Where the zygote takes requests (:mod:`zygote_shell`'s ``distrepro`` sends them there too)."""
        return self._path

    def popen(self, module: str, args: list[str], cwd: Path | str, env: Mapping[str, str], stdout: Any,
              stderr: Any, new_session: bool) -> Forked:  # fmt: skip
        """``python -m module *args`` in ``cwd`` with ``env``; ``stdout``/``stderr``: ``subprocess.PIPE``, an open
        file, or None (this process's own, as a subprocess inherits them)."""
        try:
            return fork_from(self._path, module, args, cwd, env, stdout, stderr, new_session)
        except ConnectionError as exc:
            self._proc.poll()
            log = (self._folder / "zygote.log").read_text(errors="replace")[-3000:]
            raise RuntimeError(f"{exc} (exit {self._proc.returncode}):\n{log}") from None

    def close(self) -> None:
        if self._kept_by_run:  # it ends, and removes its folder, once the run's last test process has ended
            self._log.close()
            return
        if self._proc.stdin is not None:
            self._proc.stdin.close()
        try:
            self._proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()
        self._log.close()
        shutil.rmtree(self._folder, ignore_errors=True)


class ZygoteAt:
    """A zygote that another process started and keeps (:data:`SOCKET_ENV`, :mod:`zygote_share`): this process only
    asks it to fork; ``shared``: one of the run's (:mod:`zygote_share`), which may end as this process asks."""

    def __init__(self, socket_path: str, shared: bool = False) -> None:
        self.socket_path = socket_path
        self.shared = shared

    def popen(self, module: str, args: list[str], cwd: Path | str, env: Mapping[str, str], stdout: Any,
              stderr: Any, new_session: bool) -> Forked:  # fmt: skip
        """As :meth:`Zygote.popen`."""
        try:
            return fork_from(self.socket_path, module, args, cwd, env, stdout, stderr, new_session)
        except ConnectionError as exc:
            raise RuntimeError(f"{exc} (the zygote at {self.socket_path})") from None


def startup_key(env: Mapping[str, str]) -> str:
    """A digest of the start-up part of ``env``: two environments with the same one can share a zygote."""
    return hashlib.sha256(json.dumps(sorted(_startup_part(env).items())).encode()).hexdigest()


#: the dist engine's rank, as its launcher starts it (``python -m`` of this module)
RANK_MODULES = ("distrepro.engine.multiprocess.worker",)
#: zygotes of this process by the start-up part of their environment; more environments than this start fresh
MAX_ZYGOTES = 3
#: set to 1, every process starts fresh (``python -m``), as before the zygote: to rule it out, or to time it
FRESH_ENV = "DISTREPRO_TEST_FRESH_PROCESSES"
#: a zygote this process inherits (the socket where it listens, and the :func:`startup_key` of its environment):
#: a test's shell exports them to the commands it runs (:mod:`zygote_shell`), so that a test process those start
#: (the plugin guide's ``pytest`` line) forks from that zygote instead of starting one of its own
SOCKET_ENV, KEY_ENV = "DISTREPRO_TEST_ZYGOTE_SOCKET", "DISTREPRO_TEST_ZYGOTE_KEY"
_ZYGOTES: dict[frozenset[tuple[str, str]], Zygote | ZygoteAt] = {}
_STARTING = threading.Lock()
#: set once a zygote of the run went away as this process asked it: from then on this process starts its own
_UNSHARED: list[bool] = []


def _zygote_for(env: Mapping[str, str]) -> Zygote | ZygoteAt | None:
    key = frozenset(_startup_part(env).items())
    with _STARTING:
        if key not in _ZYGOTES:
            inherited = os.environ.get(SOCKET_ENV)
            if inherited and os.environ.get(KEY_ENV) == startup_key(env):
                _ZYGOTES[key] = ZygoteAt(inherited)
                return _ZYGOTES[key]
            if len(_ZYGOTES) >= MAX_ZYGOTES:
                return None
            import zygote_share

            found = zygote_share.zygote_of_the_run(env) if not _UNSHARED else None
            started = _ZYGOTES[key] = found or Zygote(env)
            if isinstance(started, Zygote):
                atexit.register(started.close)
        return _ZYGOTES[key]


def popen_module(module: str, args: list[str], cwd: Path | str, env: Mapping[str, str], stdout: Any = None,
                 stderr: Any = None, new_session: bool = False) -> Forked | subprocess.Popen[str]:  # fmt: skip
    """``python -m module *args``, forked from this test process's zygote for the start-up part of ``env`` (one is
    started on first use, unless the one this process inherits has that start-up part), or as a fresh ``python -m``
    (text pipes) once :data:`MAX_ZYGOTES` are taken or where :data:`FRESH_ENV` is 1 in this process."""
    zygote = None if os.environ.get(FRESH_ENV) == "1" else _zygote_for(env)
    if zygote is not None:
        try:
            return zygote.popen(module, args, cwd, env, stdout, stderr, new_session)
        except RuntimeError:
            if not (isinstance(zygote, ZygoteAt) and zygote.shared):
                raise
            with _STARTING:  # the run's last other process ended it as this one asked: start one of this process's
                _UNSHARED.append(True)
                _ZYGOTES.pop(frozenset(_startup_part(env).items()), None)
            return popen_module(module, args, cwd, env, stdout, stderr, new_session)
    return subprocess.Popen(
        [sys.executable, "-m", module, *args],
        cwd=cwd,
        env=dict(env),
        stdout=stdout,
        stderr=stderr,
        text=True,
        start_new_session=new_session,
    )


def popen(argv: list[str], cwd: Path | str, env: Mapping[str, str], stdout: Any = None,
          stderr: Any = None) -> Forked | subprocess.Popen[str]:  # fmt: skip
    """``distrepro *argv`` as ``python -m distrepro.cli`` starts it (:func:`popen_module`)."""
    return popen_module("distrepro.cli", argv, cwd, env, stdout, stderr)


def cpu_of(proc: Forked | subprocess.Popen[str], reaped_children_cpu_s: float) -> float:
    """A command's CPU seconds: the zygote's measure for a forked one, else what the caller's reaped children
    gained while it was waited for."""
    return proc.cpu_s if isinstance(proc, Forked) else reaped_children_cpu_s


class ForkingSubprocess:
    """``subprocess`` as one module of distrepro sees it (``module.subprocess = ForkingSubprocess(...)``): a
    ``Popen([sys.executable, "-m", M, ...])`` of a module M in ``modules`` is forked from a zygote
    (:func:`popen_module`); every other call is ``subprocess``'s own. ``within``: in a process that a zygote forked,
    that zygote's socket and the start-up part of its environment: a process whose environment has the same start-up
    part is forked by that zygote, any other starts fresh (such a process cannot start zygotes of its own)."""

    def __init__(self, modules: tuple[str, ...], within: tuple[str, Mapping[str, str]] | None = None) -> None:
        self.modules = modules
        self.within = within

    def __getattr__(self, name: str) -> Any:
        return getattr(subprocess, name)

    def Popen(self, args: Any, **kw: Any) -> Forked | subprocess.Popen[Any]:  # subprocess's name
        args = list(args)
        env = kw.get("env")
        env = os.environ if env is None else env
        forkable = (
            len(args) > 2
            and args[:2] == [sys.executable, "-m"]
            and args[2] in self.modules
            and set(kw) <= {"env", "cwd", "start_new_session", "stdout", "stderr"}
            and (self.within is None or _startup_part(env) == self.within[1])
            and os.environ.get(FRESH_ENV) != "1"
        )
        if not forkable:
            return subprocess.Popen(args, **kw)
        how = (args[2], args[3:], kw.get("cwd") or os.getcwd(), env, kw.get("stdout"), kw.get("stderr"))
        new_session = bool(kw.get("start_new_session", False))
        if self.within is not None:
            return fork_from(self.within[0], *how, new_session)
        return popen_module(*how, new_session)

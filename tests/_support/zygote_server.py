"""The zygote of :mod:`cli_zygote`: a process that imports :data:`PRELOAD` once, then forks one process per
``python -m MODULE ARGS`` a test asks for (a ``distrepro`` command, a dist-engine rank), and reports each one's pid
and end (:mod:`cli_zygote` says why such a process is the one ``python -m`` would start, and what is shared).
"""

from __future__ import annotations

import array
import atexit
import contextlib
import json
import os
import select
import selectors
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import types
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, NoReturn

import cli_zygote  # the test's side, on the path while this module is imported: a command's own ranks ask through it
import zygote_share

SUPPORT = Path(__file__).resolve().parent
#: the CLI and every subcommand, the config reader (torch through distrepro.api), the campaign runner and the
#: in-process engine, the tracking store, the report (matplotlib), torch._dynamo (the first optimizer's), a
#: dist-engine rank (torch.distributed) and the launcher that starts one
PRELOAD = (
    "distrepro.cli.main",
    "distrepro.cli.console",
    "distrepro.cli.watch",
    "distrepro.config.run_config",
    "distrepro.orchestration.campaign",
    "distrepro.engine.inprocess.run",
    "distrepro.tracking.mlflow_client",
    "distrepro.tracking.open_runs",
    "distrepro.report.build",
    "mlflow.store.tracking.sqlalchemy_store",
    "torch._dynamo",
    "distrepro.engine.multiprocess.worker",
    "distrepro.engine.multiprocess.run",
    "distrepro.engine.multiprocess.pinning",
    "distrepro.engine.multiprocess.launch",
)
#: the status of a command whose process could not be set up (its folder, say); never one distrepro gives
UNSTARTED = 125


def serve(listen_fd: int, kept: bool = False) -> None:
    """The zygote: import :data:`PRELOAD`, then fork a command per connection and tell it the command's pid, then
    its end; return when stdin closes (the test process has ended; ``kept``: stdin is the FIFO of a zygote the
    run's test processes share, :mod:`zygote_share`, closed once none holds it, and the zygote removes its
    folder)."""
    sys.path.remove(str(SUPPORT))  # _BOOT's entry: a command's path is python -m's (see _command)
    listener = socket.socket(fileno=listen_fd)
    before = dict(os.environ)
    printed = _preload()
    added = {k: v for k, v in os.environ.items() if k not in before}
    # a command's environment holds ``added`` too (_command), and so does that of the ranks it starts
    home = (listener.getsockname(), cli_zygote._startup_part(os.environ))
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_r, False)
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda signum, frame: None)
    sel = selectors.DefaultSelector()
    sel.register(listener, selectors.EVENT_READ, "accept")
    sel.register(wake_r, selectors.EVENT_READ, "child")
    sel.register(0, selectors.EVENT_READ, "stdin")
    running: dict[int, tuple[socket.socket, float]] = {}
    while True:
        for key, _ in sel.select():
            if key.data == "stdin" and not os.read(0, 4096) and _no_one_holds(kept, home[0]):
                return
            if key.data == "accept":
                conn, _ = listener.accept()
                own = {listen_fd, wake_r, wake_w, sel.fileno(), *(c.fileno() for c, _ in running.values())}
                _start(conn, own, printed, added, running, home)
            if key.data == "child":
                with contextlib.suppress(BlockingIOError):
                    while os.read(wake_r, 4096):
                        pass
                _reap(running)


def _no_one_holds(kept: bool, socket_path: str) -> bool:
    """stdin has ended: for a shared zygote, unless a test process opened the FIFO again a moment later (it looked
    the zygote up as the last one ended), then the folder is removed, so that no process finds it again."""
    if not kept:
        return True
    time.sleep(0.5)
    if select.select([0], [], [], 0)[0] and os.read(0, 4096):
        return False
    if not select.select([0], [], [], 0)[0]:
        return False  # a writer holds it again
    shutil.rmtree(os.path.dirname(socket_path), ignore_errors=True)
    run = Path(socket_path).parent.parent
    with zygote_share.locked(run), contextlib.suppress(OSError):
        run.rmdir()  # the run's folder, once its last zygote is gone
    return True


def _start(
    conn: socket.socket,
    own: set[int],
    printed: dict[int, bytes],
    added: dict[str, str],
    running: dict[int, tuple[socket.socket, float]],
    home: tuple[str, dict[str, str]],
) -> None:
    """Fork the command ``conn`` asks for (``own``: the zygote's fds, which the command must not keep open;
    ``home``: this zygote's socket and the start-up part of its environment) and tell the test its pid."""
    try:
        request, fds = _receive(conn)
    except (OSError, ValueError, RuntimeError):
        conn.close()  # the test went away mid-request
        return
    pid = _fork(lambda: _command(request, fds, own | {conn.fileno()}, printed, added, home))
    for fd in fds:
        os.close(fd)
    running[pid] = (conn, time.monotonic())
    with contextlib.suppress(OSError):
        conn.sendall(json.dumps({"pid": pid}).encode() + b"\n")


def _reap(running: dict[int, tuple[socket.socket, float]]) -> None:
    while running:
        pid, status, usage = os.wait4(-1, os.WNOHANG)
        if pid == 0:
            return
        conn, started = running.pop(pid)
        end = {"rc": os.waitstatus_to_exitcode(status), "cpu_s": usage.ru_utime + usage.ru_stime}
        with contextlib.suppress(OSError):  # the test may have stopped listening
            conn.sendall(json.dumps(end | {"wall_s": time.monotonic() - started}).encode() + b"\n")
        conn.close()


def _receive(conn: socket.socket) -> tuple[dict[str, Any], list[int]]:
    """The request line and the fds sent with it (stdin, stdout, stderr)."""
    conn.settimeout(60)
    data, fds = b"", array.array("i")
    while not data.endswith(b"\n"):
        chunk, ancillary, _, _ = conn.recvmsg(1 << 20, socket.CMSG_SPACE(3 * fds.itemsize))
        if not chunk:
            raise RuntimeError("a request ended early")
        for level, kind, payload in ancillary:
            if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                fds.frombytes(payload[: len(payload) - len(payload) % fds.itemsize])
        data += chunk
    conn.settimeout(None)
    return json.loads(data), list(fds)


def _preload() -> dict[int, bytes]:
    """Import :data:`PRELOAD` with fds 1 and 2 going to files; what each received."""
    import importlib

    printed: dict[int, bytes] = {}
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        saved = {1: os.dup(1), 2: os.dup(2)}
        os.dup2(out.fileno(), 1)
        os.dup2(err.fileno(), 2)
        try:
            for name in PRELOAD:
                importlib.import_module(name)
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            for fd, copy in saved.items():
                os.dup2(copy, fd)
                os.close(copy)
        for fd, capture in ((1, out), (2, err)):
            capture.seek(0)
            printed[fd] = capture.read()
    # torch._dynamo's exit hook: a fresh watcher never imports torch, and every other process drops it as its
    # command ends (distrepro.cli.main.drop_exit_hooks), so no process of a command would run it
    importlib.import_module("distrepro.cli.main").drop_exit_hooks()
    return printed


def _fork(body: Callable[[], NoReturn]) -> int:
    """Fork; the child runs ``body`` (which never returns), the parent gets the child's pid."""
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        try:
            body()
        finally:
            os._exit(UNSTARTED)  # only if body itself failed to end the process
    return pid


def _command(
    request: dict[str, Any],
    fds: list[int],
    own: set[int],
    printed: dict[int, bytes],
    added: dict[str, str],
    home: tuple[str, dict[str, str]],
) -> NoReturn:
    """A process as ``python -m MODULE ARGS`` starts it: the zygote's own fds closed, a session of its own if asked
    (``start_new_session``), its folder, environment and fds 0-2, what the imports printed, ``python -m``'s path,
    then the module run as ``__main__`` by runpy, as ``-m`` runs it. The dist engine's ranks it starts are forked
    by this zygote too where their environment's start-up part is the zygote's (else fresh), as the test process's
    are (``tests/conftest.py``)."""
    import runpy

    try:
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        for fd in own:
            os.close(fd)
        if request["new_session"]:
            os.setsid()
        os.chdir(request["cwd"])
        _replace_environ(request["env"])
        for key, value in added.items():  # what importing PRELOAD set, as a fresh process's imports would
            os.environ.setdefault(key, value)
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
            os.close(fd)
        for fd, data in printed.items():
            os.write(fd, data)
        if not sys.flags.safe_path:  # ``python -m``: the working folder first on the path
            sys.path[0] = os.getcwd()
        sys.argv = ["-m", *request["args"]]  # runpy puts the module's file in sys.argv[0], as -m does
    except BaseException:
        os._exit(UNSTARTED)
    from distrepro.cli import watch
    from distrepro.engine.multiprocess import launch

    launch.subprocess = cli_zygote.ForkingSubprocess(cli_zygote.RANK_MODULES, within=home)  # type: ignore[assignment]
    # a ``run``'s watcher starts its child by forking this process instead of a fresh interpreter (cli_zygote's
    # docstring); a watcher that came to use more of subprocess fails here with AttributeError, not starts fresh ones
    flags = subprocess._args_from_interpreter_flags  # type: ignore[attr-defined]
    forking = types.SimpleNamespace(Popen=_ForkedChild, _args_from_interpreter_flags=flags)
    watch.subprocess = forking  # type: ignore[assignment]
    module = request["module"]
    # ``-m`` runs the module's code afresh as ``__main__``; a preloaded copy left in sys.modules made runpy warn
    # on stderr (a dist-engine rank's "found in sys.modules ... unpredictable behaviour"), which no fresh one does
    sys.modules.pop(module, None)
    _end_as_python_does(lambda: runpy._run_module_as_main(module, alter_argv=True))  # type: ignore[attr-defined]


def _replace_environ(env: Mapping[str, str]) -> None:
    os.environ.clear()
    os.environ.update(env)


class _ForkedChild:
    """What :func:`distrepro.cli.watch.run_watched` needs of ``subprocess.Popen``: the watched child, forked from the
    watcher, running the ``-c`` program the watcher asked a fresh interpreter to run, with its arguments and
    environment."""

    def __init__(self, args: list[str], env: dict[str, str]) -> None:
        from distrepro.cli import watch

        at = args.index("-c")
        program, rest = args[at + 1], args[at + 2 :]
        assert program == watch._CHILD, program  # the child this class stands in for

        def child() -> NoReturn:
            _replace_environ(env)
            sys.argv = ["-c", *rest]
            code = compile(program, "<string>", "exec")
            _end_as_python_does(lambda: exec(code, {"__name__": "__main__", "__builtins__": __builtins__}))

        self.pid = _fork(child)
        self.returncode: int | None = None

    def wait(self) -> int:
        if self.returncode is None:
            _, status = os.waitpid(self.pid, 0)
            self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode

    def send_signal(self, signum: int) -> None:
        if self.returncode is None:
            os.kill(self.pid, signum)


def _end_as_python_does(body: Callable[[], object]) -> NoReturn:
    """Run ``body`` as a script's top level, then end as Python does: ``SystemExit``'s status (its message printed),
    an uncaught exception's traceback and exit 1, Ctrl-C's death by SIGINT; then non-daemon threads joined, exit
    handlers run and stdout and stderr flushed (``Py_FinalizeEx``), the modules' tear-down skipped."""
    interrupted = False
    try:
        body()
        code = 0
    except SystemExit as exc:
        code = _status(exc.code)
    except KeyboardInterrupt:
        sys.excepthook(*sys.exc_info())
        code, interrupted = 1, True
    except BaseException:
        sys.excepthook(*sys.exc_info())
        code = 1
    threading._shutdown()  # type: ignore[attr-defined]
    atexit._run_exitfuncs()
    flushed = True
    for stream in (sys.stdout, sys.stderr):
        try:
            if stream is not None and not stream.closed:
                stream.flush()
        except (OSError, ValueError):
            flushed = False
    if interrupted:
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGINT)
    os._exit(code if flushed else 120)


def _status(code: object) -> int:
    """The exit status Python gives ``sys.exit(code)``: None is 0, an int itself, anything else printed and 1."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)
    return 1

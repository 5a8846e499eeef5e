"""A ``distrepro`` first on ``PATH`` whose commands are forked from a zygote (:mod:`cli_zygote`), for tests that run
shell lines as a user types them (the plugin guide's): each ``distrepro ...`` line a shell runs pays no imports.

Why the command is still the one a user's shell starts: the shell runs a program called ``distrepro`` with its
arguments, environment, working folder and fds 0-2; that program (:data:`_CLIENT`, a Python started with ``-I -S``,
which imports nothing but the standard library's sockets) hands all of those to the zygote, which forks the process
``python -m distrepro.cli`` would be (:mod:`cli_zygote` says what that means and what is shared), and exits with that
process's status once it has ended, so the shell's ``set -e`` and pipes see it as they would the console script.
Not shown to the command: the console script's own file (``sys.argv[0]`` is ``distrepro.cli``'s ``__main__``, as
under ``python -m``); the packaging and wheel tests run the installed console script itself.
``DISTREPRO_TEST_FRESH_PROCESSES=1`` (:data:`cli_zygote.FRESH_ENV`) leaves ``PATH`` as it is.
"""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
from collections.abc import Iterator, Mapping
from pathlib import Path

import cli_zygote

#: the environment variables that tell the client where the zygote listens, and test processes which zygote it is
SOCKET_ENV, KEY_ENV = cli_zygote.SOCKET_ENV, cli_zygote.KEY_ENV
#: the ``distrepro`` program: send argv, folder, environment (less :data:`SOCKET_ENV` and :data:`KEY_ENV`) and fds
#: 0-2, wait for the end, end the same way (a status, or death by the same signal)
_CLIENT = (
    f"SOCKET_ENV, KEY_ENV = {SOCKET_ENV!r}, {KEY_ENV!r}\n"
    + """\
import array, json, os, signal, socket, sys
env = dict(os.environ)
where = env.pop(SOCKET_ENV)
env.pop(KEY_ENV, None)
request = {"module": "distrepro.cli", "args": sys.argv[1:], "cwd": os.getcwd(), "env": env, "new_session": False}
conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
conn.connect(where)
fds = array.array("i", [0, 1, 2])
conn.sendmsg([json.dumps(request).encode() + b"\\n"], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, fds)])
replies = b""
while replies.count(b"\\n") < 2:
    data = conn.recv(65536)
    if not data:
        sys.exit("distrepro (test zygote client): the zygote went away: " + replies.decode(errors="replace"))
    replies += data
rc = json.loads(replies.splitlines()[1])["rc"]
if rc < 0:
    signal.signal(-rc, signal.SIG_DFL)
    os.kill(os.getpid(), -rc)
sys.exit(rc)
"""
)


@contextlib.contextmanager
def distrepro_from_a_zygote(env: Mapping[str, str]) -> Iterator[dict[str, str]]:
    """``env`` with a folder holding the client ``distrepro`` first on ``PATH`` and the socket of a zygote of its own
    (started with ``env``, closed at the end, so it takes none of :data:`cli_zygote.MAX_ZYGOTES`); ``env`` itself
    where :data:`cli_zygote.FRESH_ENV` is 1. A test process started in it (``pytest``) forks its ranks from that
    zygote where their environment's start-up part is the zygote's (:data:`cli_zygote.SOCKET_ENV`)."""
    if os.environ.get(cli_zygote.FRESH_ENV) == "1":
        yield dict(env)
        return
    with tempfile.TemporaryDirectory(prefix="zygote-shell-") as folder:
        client = Path(folder) / "distrepro"
        client.write_text(f"#!{sys.executable} -IS\n{_CLIENT}", encoding="utf-8")
        client.chmod(0o755)
        shell_env = {**env, "PATH": folder + os.pathsep + env.get("PATH", "")}
        zygote = cli_zygote.Zygote(shell_env)
        try:
            yield {**shell_env, SOCKET_ENV: zygote.socket_path, KEY_ENV: cli_zygote.startup_key(shell_env)}
        finally:
            zygote.close()

"""Run a command and count the CPU of everything it starts, orphans included, as ``/usr/bin/time`` reads it.

``/usr/bin/time`` (``wait4``) counts a child's CPU and that of the descendants it waited for. A process whose parent
ends without waiting for it (a fork server, a daemon, a zygote that outlives its test) is reparented to init, and its
CPU is lost. Made a child subreaper (Linux ``prctl(PR_SET_CHILD_SUBREAPER)``), this process adopts those orphans and
waits for them, so their CPU lands in its own children's. Exits with the command's status once every descendant has
ended. BENCHMARKS.md, "The test suite: CPU and wall":

    /usr/bin/time -f "%U %S %e" python benchmarks/subreaper.py \
        python -m pytest -m "not slow and not gpu" -n 2 --dist loadfile
"""

from __future__ import annotations

import ctypes
import os
import sys

#: <linux/prctl.h>
PR_SET_CHILD_SUBREAPER = 36


def main(argv: list[str]) -> int:
    if not argv:
        print("usage: python benchmarks/subreaper.py COMMAND [ARG ...]", file=sys.stderr)
        return 2
    if ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        print("subreaper: prctl(PR_SET_CHILD_SUBREAPER) failed (Linux only)", file=sys.stderr)
        return 2
    pid = os.fork()
    if pid == 0:
        os.execvp(argv[0], argv)
    status = 1
    while True:  # the command, then every orphan it left, until none is left
        try:
            done, raw = os.wait()
        except ChildProcessError:
            return status
        if done == pid:
            code = os.waitstatus_to_exitcode(raw)
            status = code if code >= 0 else 128 - code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

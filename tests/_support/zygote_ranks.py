"""A test's own gloo ranks forked from the zygote (:mod:`cli_zygote`) instead of ``torch.multiprocessing.spawn``:
a spawned rank is a fresh interpreter that spent about 3 s of CPU importing torch, distrepro and the test module
before its few collectives.

``python -m zygote_ranks FILE FUNCTION RANK ARG...`` imports the test's file as a module of its own, as pytest does
(its folder first on the path), and calls ``FUNCTION(RANK, *ARGS)``. Each rank is still a process of its own in its
gloo group, with the test's environment and its stdout and stderr; only the imports are shared. Where no zygote is
to be had (``DISTREPRO_TEST_FRESH_PROCESSES=1``) the ranks are fresh ``python -m`` processes.
"""

from __future__ import annotations

import importlib.util
import inspect
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path

SUPPORT = Path(__file__).resolve().parent


class RanksFailed(Exception):
    """Some rank ended with a non-zero status (the others were killed): as ``torch.multiprocessing.spawn`` raises."""


def spawn(fn: Callable[..., None], args: tuple[str, ...], nprocs: int, timeout_s: float = 300.0) -> None:
    """``fn(rank, *args)`` in ``nprocs`` processes forked from the zygote, ``fn`` a module-level function of a test
    file; returns once all have ended with status 0, else kills those left and raises :class:`RanksFailed`."""
    import cli_zygote
    from hang_guard import hang_guard

    file = inspect.getsourcefile(fn)
    assert file is not None and fn.__qualname__ == fn.__name__, fn  # a module-level function of a file
    ranks = [
        cli_zygote.popen_module("zygote_ranks", [file, fn.__name__, str(r), *args], SUPPORT, os.environ)
        for r in range(nprocs)
    ]
    deadline = time.monotonic() + hang_guard(timeout_s)
    while None in (codes := [p.poll() for p in ranks]):  # every rank polled: a failed one is seen at once
        if any(code not in (None, 0) for code in codes) or time.monotonic() > deadline:
            for p in ranks:
                p.kill()  # a no-op for a rank that has ended
            for p in ranks:
                p.wait()
            break
        time.sleep(0.05)
    failed = {rank: p.returncode for rank, p in enumerate(ranks) if p.returncode != 0}
    if failed:
        raise RanksFailed(f"{fn.__name__}: rank(s) ended with status {failed}")


def _main(file: str, function: str, rank: str, *args: str) -> None:
    path = Path(file)
    sys.path.insert(0, str(path.parent))  # pytest's own: the test file's folder first
    spec = importlib.util.spec_from_file_location(path.stem, path)
    assert spec is not None and spec.loader is not None, file
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    getattr(module, function)(int(rank), *args)


if __name__ == "__main__":
    _main(*sys.argv[1:])

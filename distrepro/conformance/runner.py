"""``distrepro test METHOD``: run the packaged generated tests (:mod:`.test_generated`) on one method.

pytest is run in this process on the test module's file, so the same code runs from a checkout and from an
installed wheel; the method must be found in the roots first, so a typo is one line, not a pytest session. After
pytest's own output, each failed test gets one line, ``FAILED test[method]: reason``, the first line of its error
(``state_dict() leaves out: residual``), so the reason is the last thing a terminal shows.
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from distrepro.errors import DistreproError, PluginError
from distrepro.plugins import registry

TEST_FILE = Path(__file__).with_name("test_generated.py")


def run_tests(methods: Sequence[str], pytest_args: Sequence[str] = ()) -> int:
    """pytest's exit status for the generated tests of ``methods`` (each found in the roots, or a
    :class:`~distrepro.errors.PluginError` as ``distrepro run`` would give)."""
    if importlib.util.find_spec("pytest") is None:
        raise DistreproError("distrepro test needs pytest: pip install 'distrepro[test]' (or 'distrepro[dev]')")
    for name in methods:
        registry.get_method(name)  # unknown or broken: the registry's one-line error
    if not methods:
        raise PluginError("distrepro test: name at least one method")
    import pytest

    os.environ["DISTREPRO_TEST_METHODS"] = ",".join(methods)
    # rootdir and no ini file: a pytest.ini or pyproject.toml of the working folder must not change the run
    args = [str(TEST_FILE), "-p", "no:cacheprovider", "--rootdir", str(TEST_FILE.parent), "-c", os.devnull]
    failures = FailureReasons()
    status = int(pytest.main([*args, "-q", *pytest_args], plugins=[failures]))
    for line in failures.lines:
        print(line, flush=True)
    return status


#: the longest reason printed on a failure's line (the whole error is in pytest's output above it)
REASON_CHARS = 300


def reason_of(message: str) -> str:
    """The first line of a failure's error, without the exception's type when it is an ``AssertionError`` (an
    ``assert`` without a message keeps pytest's ``assert ...`` text), cut at :data:`REASON_CHARS`."""
    first = next((line.strip() for line in message.splitlines() if line.strip()), "") or "failed (no message)"
    first = first.removeprefix("AssertionError: ")
    return first if len(first) <= REASON_CHARS else first[: REASON_CHARS - 1] + "…"


class FailureReasons:
    """A pytest plugin that keeps one line per failed test (setup, call or teardown): its name and the reason."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    def pytest_runtest_logreport(self, report: Any) -> None:
        if not report.failed:
            return
        crash = getattr(report.longrepr, "reprcrash", None)
        message = getattr(crash, "message", None) or str(report.longrepr or "")
        name = report.nodeid.rsplit("::", 1)[-1]
        when = "" if report.when == "call" else f" (in {report.when})"
        self.lines.append(f"FAILED {name}{when}: {reason_of(message)}")

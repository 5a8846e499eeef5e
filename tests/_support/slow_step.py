"""A fake slow step for the tests that a long step names itself: it waits until a line appears on stderr (the
heartbeat's interval shortened), then stops the command. No test times anything: the wait is a guard against a hang."""

from __future__ import annotations

import io
import sys
import time
from collections.abc import Callable
from typing import Any, NoReturn

import pytest

from distrepro.errors import DistreproError


class Stopped(DistreproError):
    """Raised by the fake step once it has seen (or given up on) its line: the command stops with one line."""


def captured_stderr(monkeypatch: pytest.MonkeyPatch, every_s: float = 0.01) -> io.StringIO:
    """stderr as a string the fake step can read, and heartbeats every ``every_s`` seconds."""
    import distrepro.orchestration.heartbeat as hb

    out = io.StringIO()
    monkeypatch.setattr(sys, "stderr", out)
    monkeypatch.setattr(hb, "HEARTBEAT_S", every_s)
    return out


def slow_step(out: io.StringIO, text: str, limit_s: float = 120.0) -> Callable[..., NoReturn]:
    """A stand-in for a slow step: returns once ``text`` is in ``out`` by raising :class:`Stopped`."""

    def step(*args: Any, **kwargs: Any) -> NoReturn:
        end = time.monotonic() + limit_s
        while text not in out.getvalue() and time.monotonic() < end:
            time.sleep(0.01)
        raise Stopped(f"stopped by the test ({'seen' if text in out.getvalue() else 'never seen'}: {text})")

    return step


def alive_lines(out: io.StringIO) -> list[str]:
    return [line for line in out.getvalue().splitlines() if line.startswith("[alive ")]

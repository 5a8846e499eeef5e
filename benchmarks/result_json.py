"""The JSON results file a benchmark leaves behind: which benchmark, when, the command, the machine and the
settings first, then the benchmark's own results, then how long the whole measurement took.

Not a script. ``dist_overhead.py`` and ``dist_fidelity.py`` write their files through it, so that both files start
with the same head, written in the same way, and a reader of one knows where to look in the other."""

from __future__ import annotations

import datetime as dt
import json
import sys
import time
from pathlib import Path
from typing import Any


def write_json(out: str | Path, payload: dict[str, Any]) -> Path:
    """Write ``payload`` as indented JSON to ``out``, making its folder first (results go to a fresh ``out/``)."""
    path = Path(out)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(payload, indent=1))
    return path


def write_results(
    out: str | Path,
    benchmark: str,
    machine: dict[str, Any],
    settings: dict[str, Any],
    results: dict[str, Any],
    t_start: float,
) -> Path:
    """Write the results file and say where it went (on stderr, so stdout keeps only the report).

    ``when`` and ``total_s`` are taken now, at the end, so that ``total_s`` covers the whole measurement since
    ``t_start`` (a ``time.monotonic()`` value); ``results`` stand between the head and ``total_s`` in their order.
    """
    path = write_json(
        out,
        {
            "benchmark": benchmark,
            "when": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
            "command": " ".join([Path(sys.executable).name, *sys.argv]),
            "machine": machine,
            "settings": settings,
            **results,
            "total_s": time.monotonic() - t_start,
        },
    )
    print(f"\nwrote {path}", file=sys.stderr)
    return path

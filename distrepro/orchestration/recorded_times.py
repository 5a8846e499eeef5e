"""The suite's own recorded session times, for the estimate of a first run (:mod:`distrepro.orchestration.estimate`).

A reproduction's wall time depends on this machine, so the estimate prefers earlier runs of the same configs in the
tracking store. A first run has none; what the suite knows then is how long each default session took when it was
measured (BENCHMARKS.md, CHANGELOG.md). Those figures are data, not code: ``recorded_times.yaml`` beside this module
holds one entry per paper and scale (runs, wall and CPU seconds, the machine and its load, date, commit, and where
the measurement is written up), and the estimate scales an entry's wall time per run to the runs asked for and says
where the figure comes from, since another machine, or this one under load, runs at another pace.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from distrepro.errors import ConfigError
from distrepro.safe_yaml import read_yaml_mapping

#: the recorded sessions, shipped with the package
DATA_FILE = Path(__file__).with_name("recorded_times.yaml")

#: each entry's fields and what they hold
FIELDS = {
    "runs": "arms × seeds of the session",
    "wall_s": "seconds of wall time, start-up and report included",
    "cpu_s": "seconds of CPU (user + sys)",
    "machine": "the machine and its load while it ran",
    "date": "when (UTC)",
    "commit": "the suite's commit",
    "source": "where the measurement is written up",
}


@dataclass(frozen=True)
class RecordedSession:
    """One measured ``distrepro reproduce <paper> [--scale <scale>]`` session."""

    paper: str
    scale: str
    runs: int
    wall_s: float
    cpu_s: float
    machine: str
    date: str
    commit: str
    source: str

    def wall_for(self, runs: int) -> float:
        """Seconds for ``runs`` runs at this session's pace (its wall time per run)."""
        return self.wall_s / self.runs * runs

    def basis(self) -> str:
        """``30 runs in 56 s, 2026-11-25, on an idle 2-core machine at load average 1.85-1.93``: what an estimate
        from it rests on."""
        return f"{self.runs} runs in {_duration(self.wall_s)}, {self.date}, on {self.machine}"


def _duration(seconds: float) -> str:
    """``56 s``, ``2 min 36 s``, ``2 h 09 min``: a recorded figure, as measured."""
    s = round(seconds)
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60} min {s % 60:02d} s"
    return f"{s // 3600} h {s // 60 % 60:02d} min"


def _entry(path: Path, paper: str, scale: str, raw: Any) -> RecordedSession:
    where = f"sessions.{paper}.{scale}"
    if not isinstance(raw, dict):
        raise ConfigError(path, where, "must be a mapping of " + ", ".join(FIELDS))
    missing, unknown = [f for f in FIELDS if f not in raw], [str(f) for f in raw if f not in FIELDS]
    if missing:
        raise ConfigError(path, where, "missing " + "; ".join(f"{f} ({FIELDS[f]})" for f in missing))
    if unknown:
        raise ConfigError(path, f"{where}.{unknown[0]}", f"unknown field; the fields are {', '.join(FIELDS)}")
    for name in ("runs", "wall_s", "cpu_s"):
        value = raw[name]
        if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
            raise ConfigError(path, f"{where}.{name}", f"must be a positive number ({FIELDS[name]}), got {value!r}")
    if not isinstance(raw["runs"], int):
        raise ConfigError(path, f"{where}.runs", f"must be a whole number, got {raw['runs']!r}")
    for name in ("machine", "date", "commit", "source"):
        if not isinstance(raw[name], str) or not raw[name].strip():
            raise ConfigError(path, f"{where}.{name}", f"must be text ({FIELDS[name]}), got {raw[name]!r}")
    fields = {k: raw[k] for k in FIELDS}
    return RecordedSession(paper, scale, **fields)


def load_recorded(path: Path = DATA_FILE) -> dict[tuple[str, str], RecordedSession]:
    """Every recorded session, by (paper, scale); a malformed file is a :class:`ConfigError` naming the field."""
    data = read_yaml_mapping(path, "recorded session times")
    sessions = data.get("sessions")
    if not isinstance(sessions, dict):
        raise ConfigError(path, "sessions", "must be a mapping: paper -> scale -> the recorded session")
    out = {}
    for paper, scales in sessions.items():
        if not isinstance(scales, dict):
            raise ConfigError(path, f"sessions.{paper}", "must be a mapping: scale -> the recorded session")
        for scale, raw in scales.items():
            out[(str(paper), str(scale))] = _entry(path, str(paper), str(scale), raw)
    return out


def recorded_session(paper: str, scale: str, path: Path = DATA_FILE) -> RecordedSession | None:
    """The recorded session of ``paper`` at ``scale``, or None when the suite has not measured it."""
    return load_recorded(path).get((paper, scale))

"""Validation errors of a ``paper.yaml`` as one line naming the file and the YAML field.

pydantic's error locations name union members and kind tags (``claims.2.speedup.claimed.float``)
that mean nothing to someone editing YAML; these helpers turn them into ``claims[2].claimed``
and report a missing or unknown claim ``kind`` before pydantic tries every kind.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import ValidationError

from distrepro.errors import ConfigError

CLAIM_KINDS = ("speedup", "final_metric", "relative_improvement", "convergence", "ordering", "non_inferiority")


def field_path(loc: tuple[Any, ...]) -> str:
    """``('claims', 2, 'speedup', 'claimed', 'float')`` → ``claims[2].claimed``.

    Drops the discriminated union's kind tag and the member names pydantic appends inside a
    ``number | [low, high]`` union, which mean nothing to someone editing YAML.
    """
    out = ""
    parts = list(loc)
    for i, part in enumerate(parts):
        if isinstance(part, int):
            out += f"[{part}]"
        elif i >= 2 and parts[i - 2] == "claims" and isinstance(parts[i - 1], int) and part in CLAIM_KINDS:
            continue
        else:
            out += ("." if out else "") + str(part)
            if part == "claimed":
                break
    return out


def precheck_kinds(source: str | Path | None, data: dict[str, Any]) -> None:
    """Report a missing or unknown ``kind`` as such, not as a failure against every kind."""
    claims = data.get("claims")
    if not isinstance(claims, list):
        return
    for i, raw in enumerate(claims):
        if not isinstance(raw, dict):
            raise ConfigError(source, f"claims[{i}]", "each claim must be a mapping")
        kind = raw.get("kind")
        if kind not in CLAIM_KINDS:
            what = "missing" if kind is None else f"unknown claim kind {kind!r}"
            raise ConfigError(source, f"claims[{i}].kind", f"{what}; expected one of {', '.join(CLAIM_KINDS)}")


def pydantic_error(source: str | Path | None, exc: ValidationError) -> ConfigError:
    # A misspelt key (extra_forbidden) usually explains the "Field required" next to it: report it first.
    items = sorted(exc.errors(), key=lambda e: e.get("type") != "extra_forbidden")
    first = items[0]
    path = field_path(tuple(first.get("loc", ())))
    msg = first.get("msg", str(exc))
    if path.endswith("claimed") and first.get("type") not in ("value_error", "missing"):
        msg = "claimed must be a number or a [low, high] range"
    msg = msg.removeprefix("Value error, ")
    others = {field_path(tuple(e.get("loc", ()))) for e in items} - {path}
    extra = f" (and {len(others)} more problem(s))" if others else ""
    return ConfigError(source, path or None, f"{msg}{extra}")

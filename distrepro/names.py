"""Names that become paths or MLflow experiments, and the one check that a written file stays in its folder.

A paper id, a campaign name or an arm ends up as a folder (``reports/<paper>/``), a file stem or the MLflow
experiment ``distrepro/<paper>``. A name such as ``../../escaped`` would make ``distrepro report`` write (and
overwrite ``index.html``) outside ``reports/``, so every such name is held to the pattern method names already
follow: a letter or digit first, then letters, digits, ``.``, ``_``, ``+`` or ``-``, at most 128 characters; no
``/``, no ``..`` component, no space, no control character. :func:`inside` is the last line of defence: every
writer joins its file to its folder through it, and a result that resolves elsewhere is refused.
"""

from __future__ import annotations

import re
from pathlib import Path

from distrepro.errors import ConfigError

#: a letter or digit, then letters, digits, '.', '_', '+' or '-' (so never '.', '..', '/', '\\' or a space)
NAME_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]{0,127}")
SHAPE = "a letter or digit, then letters, digits, '.', '_', '+' or '-' (at most 128 characters)"


def name_problem(value: object) -> str | None:
    """Why ``value`` cannot be a name that becomes a path or an experiment, or None when it can (the value
    itself is not repeated: pydantic's message adds it, :func:`check_name` too)."""
    if not isinstance(value, str):
        return f"not a string but a {type(value).__name__}"
    if not NAME_PATTERN.fullmatch(value):
        return f"not a valid name (it becomes a folder or an MLflow experiment): use {SHAPE}"
    return None


def check_name(value: str, source: str | Path | None, field: str | None) -> str:
    """``value`` unchanged, or a :class:`ConfigError` naming ``source`` and ``field``."""
    problem = name_problem(value)
    if problem:
        shown = repr(value) if len(value) <= 60 else repr(value[:57] + "...")
        raise ConfigError(source, field, f"{shown} is {problem}")
    return value


def inside(folder: str | Path, *parts: str | Path) -> Path:
    """``folder / parts``, refused unless it resolves inside ``folder`` (symlinks followed, ``..`` collapsed)."""
    base = Path(folder).resolve()
    target = base.joinpath(*parts).resolve()
    if target != base and not target.is_relative_to(base):
        raise ConfigError(str(folder), None, f"refusing to write {target}: it is outside this folder")
    return base.joinpath(*parts)

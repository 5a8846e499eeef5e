"""Config overrides as typed values: ``--set KEY=VALUE`` is read once, where the command line gives it.

An :class:`Override` is a dotted path and the value to put there. The command line parses its ``--set`` text into
one (the value read as YAML, as a config file would write it); code that overrides a field (a reproduction's arm
parameters, ``--engine``) builds one from the value it already holds. Either way :func:`apply_overrides` puts the
value into the config's data as it is: no value is written back to text to be parsed again, so a float stays that
float and a string that looks like a number stays a string.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from distrepro.errors import ConfigError
from distrepro.safe_yaml import load_yaml

#: the budget's units: setting one replaces the config's, as a budget holds exactly one
_BUDGET_UNITS = ("steps", "epochs", "samples", "emulated_seconds")


@dataclass(frozen=True)
class Override:
    """Set the config field at ``path`` (``("budget", "steps")``) to ``value``, creating mappings on the way.

    ``text`` is the ``KEY=VALUE`` it was parsed from, if any: what a reproduction records so that a later
    ``--resume`` restarts with the very ``--set`` it was given (it takes no part in equality)."""

    path: tuple[str, ...]
    value: Any
    text: str = field(default="", compare=False)

    @property
    def key(self) -> str:
        """The dotted field name, as errors name it."""
        return ".".join(self.path)

    def record(self) -> str:
        """The override as a ``--set`` text, for a record that a later command parses (a reproduction's tags):
        the text it was parsed from, else the value in JSON (which YAML reads back as the same value)."""
        return self.text or f"{self.key}={json.dumps(self.value)}"


def parse_override(text: str) -> Override:
    """Parse ``a.b.c=value`` (value read as YAML: ``0.1``, ``[1,2]``, ``true``, ``null``)."""
    if "=" not in text:
        raise ConfigError("--set", text, "overrides look like key.path=value")
    key, raw = text.split("=", 1)
    parts = tuple(p for p in key.strip().split(".") if p)
    if not parts:
        raise ConfigError("--set", text, "empty key")
    try:
        value = load_yaml(raw, "--set") if raw.strip() else ""
    except ConfigError as exc:
        shown = repr(raw) if len(raw) <= 40 else repr(raw[:37] + "...")
        raise ConfigError("--set", key, f"cannot parse value {shown}: {exc.message}") from None
    return Override(parts, value, text)


def parse_overrides(texts: Iterable[str] | None) -> list[Override]:
    """Every ``--set`` text of a command, parsed in order (a later one wins over an earlier one)."""
    return [parse_override(text) for text in texts or ()]


def apply_overrides(data: dict[str, Any], overrides: Sequence[Override]) -> dict[str, Any]:
    """Return a copy of ``data`` with each override applied in order (creating mappings as needed).

    Values are copied too: an arm's parameters shared by several configs never alias one another."""
    out = copy.deepcopy(data)
    for override in overrides:
        if not isinstance(override, Override):  # a --set text handed on unparsed: read it once, where it is given
            raise TypeError(f"override {override!r} is not an Override: parse it with parse_override()")
        parts = override.path
        node = out
        for p in parts[:-1]:
            nxt = node.get(p)
            if nxt is None:
                nxt = node[p] = {}
            if not isinstance(nxt, dict):
                raise ConfigError("--set", override.key, f"'{p}' is not a mapping")
            node = nxt
        node[parts[-1]] = copy.deepcopy(override.value)
        # a new budget unit replaces the old one; ``budget.epochs=null`` clears a unit and sets none
        if parts[0] == "budget" and len(parts) == 2 and override.value is not None:
            for k in _BUDGET_UNITS:
                if k != parts[1]:
                    out["budget"].pop(k, None)
    return out

"""Emulated workloads (``hardware_profiles/workloads.yaml``).

The harness trains a small proxy model for real but charges time and bytes as if it were a named
workload (e.g. ResNet-50 on ImageNet-100 at 224×224). This table says what that workload costs:
training FLOPs per sample (for devices whose profile has no measured throughput for it) and the
bytes of one FP32 parameter/gradient vector (for communication), and where its per-layer table is
(``layers:``, a CSV next to the table: :mod:`distrepro.hardware.layer_tables`), from which gradient readiness
and DDP's buckets follow. Keeping it in one file, apart from the hardware profiles, means a device speed and a
model size are never entered twice.

A user root's ``hardware_profiles/workloads.yaml`` (``--root``) extends the shipped table; a workload defined in
two tables is an error naming both files (``$DISTREPRO_PROFILES_DIR`` still replaces the search by one folder).
"""

from __future__ import annotations

import functools
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from distrepro.errors import ConfigError, format_pydantic_error
from distrepro.hardware.layer_tables import LayerTable, read_table
from distrepro.hardware.profile_parts import Source
from distrepro.hardware.profiles import profiles_dir
from distrepro.safe_yaml import read_yaml_mapping

_INPUT = re.compile(r"^[1-9][0-9]*(?:x[1-9][0-9]*)*$")


@dataclass(frozen=True)
class Workload:
    """One emulated workload; ``param_bytes`` is the FP32 size of the model's parameters."""

    name: str
    train_flops_per_sample: float
    param_bytes: int
    source: str
    input: str = ""
    #: the per-layer table's file (absolute), "" when the workload has none
    layers_file: str = ""

    @property
    def layers(self) -> LayerTable | None:
        """The emulated model's per-layer table, or None (then overlap falls back to the proxy's layers)."""
        return _read_layers(self.layers_file) if self.layers_file else None

    @property
    def input_shape(self) -> tuple[int, ...]:
        """``"3x224x224"`` → ``(3, 224, 224)``: one sample's shape, for a proxy's input."""
        return tuple(int(d) for d in self.input.split("x")) if self.input else ()


class _Entry(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    train_flops_per_sample: Annotated[float, Field(gt=0, allow_inf_nan=False)]
    param_bytes: Annotated[float, Field(gt=0, allow_inf_nan=False)]
    input: str
    source: Source
    layers: str | None = None

    @field_validator("input")
    @classmethod
    def _shape(cls, value: str) -> str:
        if not _INPUT.match(value):
            raise ValueError(f"expected a shape like '3x224x224', got '{value}'")
        return value


class _File(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    schema_version: Literal[1]
    workloads: dict[str, _Entry] = Field(min_length=1)


def default_workloads_path() -> Path:
    """The repo's workload table, next to the profiles (``$DISTREPRO_PROFILES_DIR`` if set)."""
    return profiles_dir() / "workloads.yaml"


@functools.lru_cache(maxsize=8)
def _load_cached(path: Path, mtime_ns: int) -> dict[str, Workload]:
    """Parsed table, cached per (file, modification time) so an edited file is re-read."""
    data = read_yaml_mapping(path, "workload table")
    try:
        parsed = _File.model_validate(data)
    except ValidationError as exc:
        raise format_pydantic_error(path, exc) from None
    return {
        name: Workload(
            name=name,
            train_flops_per_sample=float(entry.train_flops_per_sample),
            param_bytes=round(entry.param_bytes),
            source=entry.source,
            input=entry.input,
            layers_file=str((path.parent / entry.layers).resolve()) if entry.layers else "",
        )
        for name, entry in parsed.workloads.items()
    }


@functools.lru_cache(maxsize=32)
def _read_layers(path: str) -> LayerTable:
    return read_table(Path(path))


def _table_paths() -> list[Path]:
    """The workload tables searched by default: ``$DISTREPRO_PROFILES_DIR``'s alone, else every root's."""
    if os.environ.get("DISTREPRO_PROFILES_DIR"):
        return [default_workloads_path()]
    from distrepro.plugins.roots import roots

    found = [base / "hardware_profiles" / "workloads.yaml" for base in roots()]
    return [p for p in found if p.is_file()] or [default_workloads_path()]


def _load_one(path: Path) -> dict[str, Workload]:
    resolved = path.resolve()
    if not resolved.is_file():
        raise ConfigError(resolved, None, "workload table not found")
    return dict(_load_cached(resolved, resolved.stat().st_mtime_ns))


def load_workloads(path: Path | None = None) -> dict[str, Workload]:
    """All workloads of the table at ``path``; by default the union of every root's table (the shipped one first),
    where a name defined twice is a :class:`ConfigError` naming both files."""
    if path is not None:
        return _load_one(Path(path))
    merged: dict[str, Workload] = {}
    origin: dict[str, Path] = {}
    for table_path in _table_paths():
        for name, workload in _load_one(table_path).items():
            if name in merged:
                raise ConfigError(
                    table_path,
                    f"workloads.{name}",
                    f"workload '{name}' is defined twice: {origin[name]} and {table_path}; rename one",
                )
            merged[name], origin[name] = workload, table_path
    return merged


def get_workload(name: str, path: Path | None = None) -> Workload:
    """The named workload, or a ConfigError listing the known ones."""
    table = load_workloads(path)
    if name not in table:
        source = Path(path) if path is not None else _table_paths()[-1]
        known = ", ".join(sorted(table))
        raise ConfigError(source, "emulated_workload", f"unknown workload '{name}'; known: {known}")
    return table[name]

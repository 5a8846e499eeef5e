"""Emulated workloads (``hardware_profiles/workloads.yaml``).

The harness trains a small proxy model for real but charges time and bytes as if it were a named
workload (e.g. ResNet-50 on ImageNet-100 at 224×224). This table says what that workload costs:
training FLOPs per sample (for devices whose profile has no measured throughput for it) and the
bytes of one FP32 parameter/gradient vector (for communication). Keeping it in one file, apart
from the hardware profiles, means a device speed and a model size are never entered twice.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from distrepro.errors import ConfigError, format_pydantic_error
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
        )
        for name, entry in parsed.workloads.items()
    }


def load_workloads(path: Path | None = None) -> dict[str, Workload]:
    """All workloads of the table at ``path`` (default: :func:`default_workloads_path`)."""
    resolved = (Path(path) if path is not None else default_workloads_path()).resolve()
    if not resolved.is_file():
        raise ConfigError(resolved, None, "workload table not found")
    return dict(_load_cached(resolved, resolved.stat().st_mtime_ns))


def get_workload(name: str, path: Path | None = None) -> Workload:
    """The named workload, or a ConfigError listing the known ones."""
    table = load_workloads(path)
    if name not in table:
        source = Path(path) if path is not None else default_workloads_path()
        known = ", ".join(sorted(table))
        raise ConfigError(source, "emulated_workload", f"unknown workload '{name}'; known: {known}")
    return table[name]

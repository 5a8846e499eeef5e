"""Shared by several test modules (moved out of test_profiles.py so tests in other folders can use it)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from distrepro.errors import ConfigError
from distrepro.hardware.profiles import load_profile


def minimal_profile() -> dict[str, Any]:
    """Two nodes of two GPUs each; the second node's devices sit behind a 1 GB/s NIC."""
    link = {"latency_us": 10, "bandwidth_gbytes_per_s": 10, "source": "[E] test"}
    gpu = {"name": "g", "kind": "gpu", "count": 2, "memory_gib": 24, "source": "[E] test"}
    return {
        "schema_version": 1,
        "name": "tiny",
        "description": "test profile",
        "nodes": [
            {"name": "a", "devices": [dict(gpu)]},
            {
                "name": "b",
                "devices": [dict(gpu, nic={"latency_us": 200, "bandwidth_gbytes_per_s": 1, "source": "[E] nic"})],
            },
        ],
        "network": {
            "intra_node": dict(link),
            "inter_node": {"latency_us": 50, "bandwidth_gbytes_per_s": 2, "source": "[E] test"},
            "variants": {
                "slow": {
                    "intra_node": dict(link),
                    "inter_node": {"latency_us": 30000, "bandwidth_gbytes_per_s": 0.05, "source": "[E] wan"},
                }
            },
        },
    }


def write(tmp_path: Path, data: Any, name: str = "bad") -> Path:
    path = tmp_path / f"{name}.yaml"
    path.write_text(data if isinstance(data, str) else yaml.safe_dump(data), encoding="utf-8")
    return path


def expect_error(path: Path, field: str | None, *fragments: str, variant: str | None = None) -> ConfigError:
    with pytest.raises(ConfigError) as info:
        load_profile(path, variant=variant)
    err = info.value
    assert err.source == str(path)
    assert str(path) in str(err)
    if field is not None:
        assert err.field == field
        assert f"'{field}'" in str(err)
    for fragment in fragments:
        assert fragment in str(err)
    return err

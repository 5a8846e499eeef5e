"""User roots extend the workload table (issue 33)."""

from __future__ import annotations

from pathlib import Path

import pytest

from distrepro.errors import ConfigError
from distrepro.hardware.workloads import get_workload, load_workloads

_ENTRY = """schema_version: 1
workloads:
  {name}:
    train_flops_per_sample: 1.0e9
    param_bytes: 4.0e6
    input: "3x32x32"
    source: "[E] a user's own model"
"""


def _root(base: Path, name: str) -> Path:
    (base / "hardware_profiles").mkdir(parents=True)
    (base / "hardware_profiles" / "workloads.yaml").write_text(_ENTRY.format(name=name), encoding="utf-8")
    return base


def test_a_roots_workloads_extend_the_shipped_table(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DISTREPRO_PROFILES_DIR", raising=False)
    monkeypatch.setenv("DISTREPRO_PATH", str(_root(tmp_path / "mine", "my_net")))
    table = load_workloads()
    assert "my_net" in table and "resnet50_in100_224" in table
    assert get_workload("my_net").param_bytes == 4_000_000 and get_workload("my_net").layers is None


def test_a_clash_names_both_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DISTREPRO_PROFILES_DIR", raising=False)
    monkeypatch.setenv("DISTREPRO_PATH", str(_root(tmp_path / "mine", "resnet50_in100_224")))
    with pytest.raises(ConfigError) as info:
        load_workloads()
    message = str(info.value)
    assert "defined twice" in message and str(tmp_path / "mine") in message and "hardware_profiles" in message

"""Published single-device measurements that profiles reference by name (``hardware_profiles/catalogue``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from distrepro.errors import ConfigError
from distrepro.hardware.catalogue import UNMEASURED_RANGE, Entry, load_catalogue, resolve_entry
from distrepro.hardware.profiles import load_profile
from distrepro.hardware.workloads import load_workloads
from distrepro.plugins import roots

CATALOGUE = """\
schema_version: 1
entries:
  gpu-x-r50:
    device: GPU X
    workload: resnet50_in1k_224
    precision: amp
    points: [{batch: 16, step_ms: 40}, {batch: 64, step_ms: 100}, {batch: 256, samples_per_s: 1000}]
    source: "[M] a test table"
"""

PROFILE = """\
schema_version: 2
name: cat-2
description: two nodes, one GPU each, compute from the catalogue
nodes:
  - name: a
    devices:
      - &gpu
        name: gpu-x
        kind: gpu
        count: 1
        memory_gib: 16
        compute: {{resnet50_in1k_224: {compute}}}
        source: "[S] a test device"
  - name: b
    devices: [*gpu]
network:
  intra_node: {{latency_us: 1, bandwidth_gbytes_per_s: 10, source: "[E] test"}}
  inter_node: {{latency_us: 1, bandwidth_gbytes_per_s: 10, source: "[E] test"}}
"""


@pytest.fixture(autouse=True)
def shipped_roots_only(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in (roots.ROOT_ENV, roots.PATH_ENV, "DISTREPRO_PROFILES_DIR"):
        monkeypatch.setenv(name, "")
        monkeypatch.delenv(name)


def user_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, compute: str) -> Path:
    (tmp_path / "hardware_profiles" / "catalogue").mkdir(parents=True)
    (tmp_path / "hardware_profiles" / "catalogue" / "mine.yaml").write_text(CATALOGUE)
    path = tmp_path / "hardware_profiles" / "cat-2.yaml"
    path.write_text(PROFILE.format(compute=compute))
    monkeypatch.setenv(roots.PATH_ENV, str(tmp_path))
    return path


def test_the_shipped_catalogue_names_real_workloads_and_cites_each_entry() -> None:
    shipped = load_catalogue()
    workloads = load_workloads()
    assert len(shipped) >= 8
    for name, (entry, _) in shipped.items():
        assert entry.workload in workloads, name
        assert entry.source.startswith("[M]"), name
        assert "@" in entry.source or ".com/" in entry.source, name  # a file at a commit, or a page


def test_between_two_measured_batches_the_line_goes_through_both() -> None:
    entry = Entry.model_validate(
        {"device": "x", "workload": "w", "precision": "amp", "source": "[M] t",
         "points": [{"batch": 16, "step_ms": 40}, {"batch": 64, "step_ms": 100}]}
    )  # fmt: skip
    t0, peak, bound, how = resolve_entry(entry, 32)
    assert bound is None and "between" in how
    assert t0 + 16 / peak == pytest.approx(0.040) and t0 + 64 / peak == pytest.approx(0.100)


def test_outside_the_measured_batches_the_speed_range_is_the_physical_bound() -> None:
    entry = Entry.model_validate(
        {"device": "x", "workload": "w", "precision": "amp", "source": "[M] t",
         "points": [{"batch": 256, "samples_per_s": 800}]}
    )  # fmt: skip
    assert resolve_entry(entry, 256)[2] is None
    assert resolve_entry(entry, 32)[2] == (0.125, 1.0)  # a saturating throughput: between b/b0 and 1
    assert resolve_entry(entry, 512)[2] == (1.0, 2.0)


def test_a_profile_takes_its_speed_from_the_catalogue(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from distrepro.timing.compute import ComputeModel

    path = user_root(tmp_path, monkeypatch, "{catalogue: gpu-x-r50, batch: 32}")
    profile = load_profile("cat-2")
    assert profile.source_path == str(path)
    model = ComputeModel(profile, "resnet50_in1k_224", 1e9)
    for rank in (0, 1):  # the group shared through a YAML anchor resolves the same on both nodes
        assert model.nominal_step_seconds(rank, 16) == pytest.approx(0.040)
        assert model.nominal_step_seconds(rank, 64) == pytest.approx(0.100)
    assert "catalogue 'gpu-x-r50'" in profile.device(0).source
    assert "speed" not in profile.device(0).ranges  # interpolated: nothing to widen


def test_extrapolating_widens_the_speed_range(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    user_root(tmp_path, monkeypatch, "{catalogue: gpu-x-r50, batch: 4}")
    speed = load_profile("cat-2").device(0).ranges["speed"]
    assert speed.low == pytest.approx(0.25) and speed.high == 1.0
    assert "extrapolated from batch 16 to 4" in speed.reason


def test_unmeasured_says_so_and_widens(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = user_root(tmp_path, monkeypatch, '{unmeasured: "nobody published it"}')
    with pytest.raises(ConfigError, match=r"compute\.resnet50_in1k_224.*declare the derived"):
        load_profile("cat-2")
    text = path.read_text().replace(
        "        compute:", "        throughput_samples_per_s: {resnet50_in1k_224: 900}\n        compute:"
    )
    path.write_text(text)
    device = load_profile("cat-2").device(0)
    assert (device.ranges["speed"].low, device.ranges["speed"].high) == UNMEASURED_RANGE
    assert "nobody published it" in device.source


@pytest.mark.parametrize(
    ("compute", "message"),
    [
        (
            "{catalogue: no-such}",
            r"nodes\[0\]\.devices\[0\]\.compute\.resnet50_in1k_224\.catalogue.*no catalogue entry",
        ),
        ("{catalogue: gpu-x-r50, unmeasured: x}", "either catalogue"),
        ("{catalogue: gpu-x-r50, batch: 0}", "greater than or equal to 1"),
    ],
)
def test_a_bad_reference_is_one_line_naming_the_field(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, compute: str, message: str
) -> None:
    path = user_root(tmp_path, monkeypatch, compute)
    with pytest.raises(ConfigError, match=message) as err:
        load_profile("cat-2")
    assert str(path) in str(err.value) and "\n" not in str(err.value)


def test_a_reference_to_another_workload_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = user_root(tmp_path, monkeypatch, "{catalogue: gpu-x-r50}")
    path.write_text(path.read_text().replace("compute: {resnet50_in1k_224:", "compute: {resnet18_in1k_224:"))
    with pytest.raises(ConfigError, match="measures resnet50_in1k_224, not resnet18_in1k_224"):
        load_profile("cat-2")


def test_a_name_in_two_files_is_an_error_naming_both(tmp_path: Path) -> None:
    first, second = tmp_path / "a.yaml", tmp_path / "b.yaml"
    first.write_text(CATALOGUE)
    second.write_text(CATALOGUE)
    with pytest.raises(ConfigError, match=r"b\.yaml.*also defined in .*a\.yaml"):
        load_catalogue([first, second])

"""Hardware profiles and the workload table: shipped files load, links resolve, bad files fail clearly."""

from __future__ import annotations

import copy
import hashlib
import json
from pathlib import Path

import pytest
from profile_files import expect_error, minimal_profile, write
from pydantic import ValidationError

from distrepro.errors import ConfigError
from distrepro.hardware.profiles import HardwareProfile, list_profiles, load_profile
from distrepro.hardware.workloads import get_workload, load_workloads

pytestmark = pytest.mark.smoke

SHIPPED = {"homogeneous-4": 4, "hetero-2fast-2slow": 4, "cadp-ijcai25": 8}


# ---------------------------------------------------------------------- shipped profiles


def test_list_profiles_finds_shipped_and_skips_workload_table() -> None:
    names = list_profiles()
    assert set(SHIPPED) <= set(names)
    assert "workloads" not in names


@pytest.mark.parametrize(("name", "world"), sorted(SHIPPED.items()))
def test_shipped_profile_loads(name: str, world: int) -> None:
    profile = load_profile(name)
    assert profile.name == name
    assert profile.world_size == world
    assert profile.source_path is not None and profile.source_path.endswith(f"{name}.yaml")
    assert len(profile.digest()) == 64
    # round trip through plain data gives the same validated model
    again = HardwareProfile.model_validate(copy.deepcopy(profile.to_yaml_dict()))
    assert again == profile and again.digest() == profile.digest()


@pytest.mark.parametrize("name", sorted(SHIPPED))
def test_every_group_can_charge_any_workload_and_flops_match_table(name: str) -> None:
    """effective_flops_per_s is documented as throughput × FLOPs of resnet50_in100_224; check it."""
    flops = get_workload("resnet50_in100_224").train_flops_per_sample
    for node in load_profile(name).nodes:
        for group in node.devices:
            assert group.effective_flops_per_s is not None
            declared = group.throughput_samples_per_s["resnet50_in100_224"]
            assert group.effective_flops_per_s == pytest.approx(declared * flops, rel=1e-3)
            for workload in group.throughput_samples_per_s:
                get_workload(workload)  # every table key is a known workload


def test_cadp_layout_matches_paper() -> None:
    profile = load_profile("cadp-ijcai25")
    kinds = [profile.device(r).kind for r in range(8)]
    assert kinds == ["gpu"] * 4 + ["cpu"] * 4
    assert [profile.device(r).cores for r in range(4, 8)] == [4, 4, 16, 8]
    assert [profile.device(r).memory_gib for r in range(4, 8)] == [8, 8, 32, 16]
    assert [profile.device(r).batch_size for r in range(8)] == [64] * 4 + [4] * 4
    assert len({profile.node_of(r) for r in range(4)}) == 1
    assert len({profile.node_of(r) for r in range(4, 8)}) == 4


def test_hetero_slow_pair_is_half_speed() -> None:
    profile = load_profile("hetero-2fast-2slow")
    fast, slow = profile.device(0), profile.device(2)
    assert profile.node_of(0) == profile.node_of(1) != profile.node_of(2) == profile.node_of(3)
    for workload, speed in fast.throughput_samples_per_s.items():
        assert slow.throughput_samples_per_s[workload] == pytest.approx(speed / 2)


def test_cadp_links_default_and_geo() -> None:
    profile = load_profile("cadp-ijcai25")
    intra = profile.link(0, 3)
    assert (intra.latency_s, intra.bandwidth_bytes_per_s) == pytest.approx((15e-6, 8e9))
    gpu_cpu = profile.link(0, 4)  # 10 GbE inter-node capped by the CPU's 1 GbE NIC
    assert (gpu_cpu.latency_s, gpu_cpu.bandwidth_bytes_per_s) == pytest.approx((150e-6, 0.11e9))
    assert profile.link(4, 0) == gpu_cpu
    assert profile.server_link(0).bandwidth_bytes_per_s == pytest.approx(1.1e9)
    assert profile.server_link(6).bandwidth_bytes_per_s == pytest.approx(0.11e9)

    geo = load_profile("cadp-ijcai25", variant="geo")
    assert geo.variant == "geo" and geo.digest() != profile.digest()
    assert geo.link(0, 3) == intra  # the GPU box is still one box
    wan = geo.link(0, 4)  # WAN (0.0625 GB/s) is below the 1 GbE NIC, 30 ms above its 150 us
    assert (wan.latency_s, wan.bandwidth_bytes_per_s) == pytest.approx((0.03, 0.0625e9))
    assert geo.server_link(0) == wan


# ---------------------------------------------------------------------- resolution rules


def test_rank_numbering_and_nic_caps(tmp_path: Path) -> None:
    profile = load_profile(write(tmp_path, minimal_profile(), "tiny"))
    assert profile.world_size == 4
    assert [profile.node_of(r) for r in range(4)] == ["a", "a", "b", "b"]
    assert [profile.device_path(r) for r in range(4)] == ["nodes[0].devices[0]"] * 2 + ["nodes[1].devices[0]"] * 2
    same_fast = profile.link(0, 1)
    assert (same_fast.latency_s, same_fast.bandwidth_bytes_per_s) == pytest.approx((10e-6, 10e9))
    # the NIC caps even the intra-node link of a device that has one
    same_nic = profile.link(2, 3)
    assert (same_nic.latency_s, same_nic.bandwidth_bytes_per_s) == pytest.approx((200e-6, 1e9))
    cross = profile.link(1, 2)  # inter (50 us, 2 GB/s) vs NIC (200 us, 1 GB/s)
    assert (cross.latency_s, cross.bandwidth_bytes_per_s) == pytest.approx((200e-6, 1e9))
    # no server link declared: inter_node, capped by the rank's NIC
    assert profile.server_link(0).bandwidth_bytes_per_s == pytest.approx(2e9)
    assert profile.server_link(3).bandwidth_bytes_per_s == pytest.approx(1e9)
    with pytest.raises(ValueError, match="itself"):
        profile.link(1, 1)
    with pytest.raises(ConfigError, match="world_size 4"):
        profile.device(4)


@pytest.mark.parametrize("name", [*sorted(SHIPPED), "chao-2m-1124", "acid-a100-16"])
def test_rank_lookups_read_the_table_pydantic_holds(name: str) -> None:
    """The lookups read the private store directly (speed only): the same table ``profile._ranks`` gives through
    pydantic, the same device objects, and a copy (model_copy) reads its own."""
    profile = load_profile(name)
    ranks = profile._ranks  # the old read, through BaseModel.__getattr__
    assert profile.world_size == len(ranks) > 0
    for rank, (i, j) in enumerate(ranks):
        assert profile.device(rank) is profile.nodes[i].devices[j]
        assert profile.node_index(rank) == i and profile.device_path(rank) == f"nodes[{i}].devices[{j}]"
    assert profile.link(0, profile.world_size - 1) == profile.link_classes().link(0, profile.world_size - 1)
    other = profile.model_copy()
    other._ranks = [(0, 0)] * len(ranks)
    assert other.node_index(len(ranks) - 1) == 0 and profile.node_index(len(ranks) - 1) == ranks[-1][0]
    for bad in (-1, len(ranks)):
        with pytest.raises(ConfigError, match=f"rank {bad} is out of range"):
            profile.device(bad)


def test_variant_replaces_network(tmp_path: Path) -> None:
    path = write(tmp_path, minimal_profile(), "tiny")
    slow = load_profile(path, variant="slow")
    assert slow.link(0, 2).latency_s == pytest.approx(0.03)
    assert slow.link(0, 2).bandwidth_bytes_per_s == pytest.approx(0.05e9)
    assert load_profile(path).link(0, 2).latency_s == pytest.approx(200e-6)


def test_search_dir_and_env_override(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write(tmp_path, minimal_profile(), "tiny")
    assert load_profile("tiny", search_dir=tmp_path).world_size == 4
    monkeypatch.setenv("DISTREPRO_PROFILES_DIR", str(tmp_path))
    assert list_profiles() == ["tiny"]
    assert load_profile("tiny").name == "tiny"


def test_speed_factor_is_piecewise_constant(tmp_path: Path) -> None:
    data = minimal_profile()
    data["nodes"][0]["devices"][0]["speed_changes"] = [{"at_s": 10, "factor": 0.5}, {"at_s": 20, "factor": 2}]
    device = load_profile(write(tmp_path, data)).device(0)
    assert [device.speed_factor(t) for t in (0, 9.99, 10, 15, 20, 1e9)] == [1, 1, 0.5, 0.5, 2, 2]


# ---------------------------------------------------------------------- bad files


def test_unknown_profile_name_lists_available(tmp_path: Path) -> None:
    write(tmp_path, minimal_profile(), "tiny")
    with pytest.raises(ConfigError) as info:
        load_profile("nope", search_dir=tmp_path)
    assert str(tmp_path / "nope.yaml") in str(info.value)
    assert "available profiles" in str(info.value) and "tiny" in str(info.value)


def test_malformed_yaml_names_line(tmp_path: Path) -> None:
    path = write(tmp_path, "schema_version: 1\nname: x\nnodes: [\n  {name: a\n")
    expect_error(path, None, "malformed YAML", "line ")


def test_duplicate_key_is_an_error(tmp_path: Path) -> None:
    path = write(tmp_path, "schema_version: 1\nname: x\nname: y\n")
    expect_error(path, "name", "duplicate key 'name' at line 3 (first at line 2)")


def test_repeated_node_names_are_named_once_each(tmp_path: Path) -> None:
    data = minimal_profile()
    data["nodes"] = [dict(data["nodes"][0], name=name) for name in ["b", "a", "b", "c", "a", "b"]]
    expect_error(write(tmp_path, data), "nodes", "node names must be unique", "['a', 'b']")


def test_negative_bandwidth(tmp_path: Path) -> None:
    data = minimal_profile()
    data["network"]["inter_node"]["bandwidth_gbytes_per_s"] = -1
    expect_error(write(tmp_path, data), "network.inter_node.bandwidth_gbytes_per_s", "greater than 0")


def test_missing_count(tmp_path: Path) -> None:
    data = minimal_profile()
    del data["nodes"][1]["devices"][0]["count"]
    expect_error(write(tmp_path, data), "nodes[1].devices[0].count", "required")


def test_unknown_key(tmp_path: Path) -> None:
    data = minimal_profile()
    data["nodes"][0]["devices"][0]["bandwith"] = 3
    expect_error(write(tmp_path, data), "nodes[0].devices[0].bandwith", "not permitted")


def test_source_needs_a_tag(tmp_path: Path) -> None:
    data = minimal_profile()
    data["network"]["intra_node"]["source"] = "trust me"
    expect_error(write(tmp_path, data), "network.intra_node.source", "provenance tag")


def test_unsorted_speed_changes(tmp_path: Path) -> None:
    data = minimal_profile()
    data["nodes"][0]["devices"][0]["speed_changes"] = [{"at_s": 5, "factor": 1}, {"at_s": 1, "factor": 2}]
    expect_error(write(tmp_path, data), "nodes[0].devices[0].speed_changes", "strictly increasing")


def test_unknown_variant(tmp_path: Path) -> None:
    expect_error(write(tmp_path, minimal_profile()), "network.variants", "unknown variant 'geo'", "slow", variant="geo")


def test_bad_variant_entry_names_nested_field(tmp_path: Path) -> None:
    data = minimal_profile()
    data["network"]["variants"]["slow"]["inter_node"]["latency_us"] = -5
    expect_error(write(tmp_path, data), "network.variants.slow.inter_node.latency_us")


def test_top_level_must_be_mapping(tmp_path: Path) -> None:
    expect_error(write(tmp_path, "- 1\n- 2\n"), None, "mapping")


# ---------------------------------------------------------------------- workloads


def test_workload_table_has_calibration_figures() -> None:
    table = load_workloads()
    expected = {
        "resnet18_in100_224": (10.65e9, 44_900_000),
        "resnet50_in100_224": (24.29e9, 94_900_000),
        "resnet18_cifar_32": (3.33e9, 44_700_000),
        "resnet50_in1k_224": (24.30e9, 102_200_000),
        "vit_b16_224": (105e9, 346_300_000),
    }
    for name, (flops, nbytes) in expected.items():
        assert (table[name].train_flops_per_sample, table[name].param_bytes) == (flops, nbytes)
        assert "[" in table[name].source
    assert table["resnet18_cifar_32"].input_shape == (3, 32, 32)


def test_unknown_workload_lists_known() -> None:
    with pytest.raises(ConfigError) as info:
        get_workload("resnet9000")
    assert info.value.field == "emulated_workload"
    assert "unknown workload 'resnet9000'" in str(info.value) and "resnet50_in100_224" in str(info.value)
    assert "workloads.yaml" in str(info.value)


def test_bad_workload_entry(tmp_path: Path) -> None:
    entry = {"train_flops_per_sample": 0, "param_bytes": 1, "input": "3x8x8", "source": "[E] t"}
    path = write(tmp_path, {"schema_version": 1, "workloads": {"w": entry}})
    with pytest.raises(ConfigError) as info:
        load_workloads(path)
    assert info.value.field == "workloads.w.train_flops_per_sample"
    assert str(path) in str(info.value)
    entry = dict(entry, train_flops_per_sample=1, input="224 by 224")
    bad_input = write(tmp_path, {"schema_version": 1, "workloads": {"w": entry}}, "bad_input")
    with pytest.raises(ConfigError) as info:
        load_workloads(bad_input)
    assert info.value.field == "workloads.w.input" and "3x224x224" in str(info.value)


def test_a_node_count_stands_for_identical_nodes() -> None:
    """Issue 33: ``nodes: [{count: 3, name: box, ...}]`` is three nodes box0-box2 (inter-node links between them)."""
    device = {"name": "a100", "kind": "gpu", "count": 4, "memory_gib": 40, "effective_flops_per_s": 1e12}
    link = {"latency_us": 1, "bandwidth_gbytes_per_s": 100, "source": "[E] test"}
    data = {
        "schema_version": 2,
        "name": "x",
        "description": "d",
        "nodes": [{"count": 3, "name": "box", "devices": [device | {"source": "[E] test"}]}],
        "network": {"intra_node": link, "inter_node": link | {"latency_us": 5}},
    }
    profile = HardwareProfile.model_validate(data)
    assert profile.world_size == 12 and [n.name for n in profile.nodes] == ["box0", "box1", "box2"]
    assert profile.node_index(4) == 1 and profile.link(0, 4).latency_s == pytest.approx(5e-6)
    with pytest.raises(ValidationError, match="count"):
        HardwareProfile.model_validate(data | {"nodes": [{"count": 0, "name": "b", "devices": [device]}]})


def test_a_framework_block_is_checked_and_its_absence_keeps_the_digest(tmp_path: Path) -> None:
    data = minimal_profile()
    plain = load_profile(write(tmp_path, data))
    assert plain.framework is None and plain.backend() in ("nccl", "gloo")
    dumped = {k: v for k, v in plain.model_dump(mode="json").items() if k != "framework"}
    text = json.dumps(dumped, sort_keys=True, separators=(",", ":"))
    assert plain.digest() == hashlib.sha256(text.encode()).hexdigest()  # the digest it had before the block existed
    bad = copy.deepcopy(data)
    bad["framework"] = {"contention": 2, "source": "[E] test"}
    expect_error(write(tmp_path, bad), "framework.contention", "less than or equal to 1")
    bad["framework"] = {"backend": "mpi", "source": "[E] test"}
    expect_error(write(tmp_path, bad), "framework.backend", "nccl", "gloo")
    speed = {"speed": {"low": 1, "high": 2, "reason": "x"}}
    bad["framework"] = {"contention": 0.1, "source": "[E] test", "ranges": speed}
    expect_error(write(tmp_path, bad), "framework", "ranges only contention, launch_us, bucket_passes")
    declared = copy.deepcopy(data)
    declared["framework"] = {"backend": "gloo", "contention": 0.2, "source": "[E] test"}
    assert load_profile(write(tmp_path, declared)).backend() == "gloo"


_GUARDED = """
import resource, sys
resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))  # a regression dies here, not the machine
from distrepro.errors import ConfigError
from distrepro.hardware.profiles import load_profile
try:
    load_profile(sys.argv[1])
except ConfigError as exc:
    print(exc)
"""


@pytest.mark.parametrize(("count", "devices"), [(2_000_000, 1), (10**12, 4), (5_000, 4)])
def test_a_node_count_past_the_rank_limit_is_refused_before_any_node_is_built(
    tmp_path: Path, count: int, devices: int
) -> None:
    """``count: 2000000`` built every node (5 GB) before the rank limit was checked; ``count: 1e12`` would exhaust
    the machine. The sum of count x devices per node is checked first, naming the entry; run under a 2 GiB address
    space limit, so a regression fails this test instead of the machine."""
    import subprocess
    import sys

    data = minimal_profile()
    node = data["nodes"][0]
    node["devices"][0]["count"] = devices
    data["nodes"] = [node | {"count": count, "name": "box"}]
    path = write(tmp_path, data)
    proc = subprocess.run(
        [sys.executable, "-c", _GUARDED, str(path)], capture_output=True, text=True, timeout=120, check=False
    )
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr[-2000:]
    line = proc.stdout.strip()
    assert "\n" not in line and str(path) in line and "field 'nodes'" in line, line
    assert f"nodes[0].count: {count} node(s) of {devices} device(s)" in line and "16384 ranks" in line, line

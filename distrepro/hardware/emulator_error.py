"""How far the emulator's time model is from real clusters, for the setting an arm was emulated on.

An emulated time is a prediction, and a timing verdict that ignores how wrong the prediction can be restates a
validation miss as a finding. ``benchmarks/validate_emulator.py --write-error-bands`` scores the time model against
published measurements, each source with every constant derived *without* that source (leave one source out), and
writes the errors per class of measurement to ``hardware_profiles/validation/emulator_error.yaml``. This module reads
that file and answers one question: which band does an arm's emulated time carry?

* **A paper's own cell** (a point of the validation that ``stands_for`` this paper, profile, method and params):
  that cell's own out-of-sample error. Decent-DP's Fig. 6 cells are such points.
* **A class the validation covers** (the workload kind the arm's exchange and the profile's nodes make, crossed with
  the interconnect the profile's links are): the class's median absolute error, when at least
  :data:`MIN_SOURCES` sources back it; a class with one source gives the larger of its error and the next line's.
* **Otherwise** (CPUs, a parameter server, PCIe): the emulator's error with each source counted once, said as not
  covered.

The interconnect is read off the profile's physics: a multi-node profile whose inter-node latency is at least
:data:`TCP_LATENCY_US` runs over TCP Ethernet (RDMA fabrics are single-digit microseconds); a single node's GPUs are on
NVLink when the intra-node link carries at least :data:`NVLINK_GBYTES_PER_S`, else on PCIe.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from distrepro.errors import ConfigError
from distrepro.hardware.profiles import HardwareProfile
from distrepro.plugins.roots import find_file
from distrepro.safe_yaml import read_yaml_mapping

#: where the bands live, under a plugin root
BANDS_FILE = Path("hardware_profiles") / "validation" / "emulator_error.yaml"
#: a class backed by fewer sources is not a validated band of its own
MIN_SOURCES = 2
#: inter-node latency from which a fabric is TCP Ethernet (NCCL over sockets: 15-60 us; RDMA: 1-5 us)
TCP_LATENCY_US = 10.0
#: intra-node bandwidth from which GPUs are on NVLink (PCIe 4.0 x16: 31.5 GB/s line rate)
NVLINK_GBYTES_PER_S = 50.0


@dataclass(frozen=True)
class ErrorBand:
    """One arm's band: ``rel`` is the relative error of its emulated time (median |error| out of sample), ``bias``
    the signed median (+ = predicted too fast), ``basis`` what it rests on, in words, for the report."""

    rel: float
    bias: float
    basis: str
    covered: bool


@functools.lru_cache(maxsize=8)
def _bands(path: Path) -> dict[str, Any]:
    return read_yaml_mapping(path)


def bands_path() -> Path:
    """The band file over the plugin roots; a one-line error naming it when it is missing."""
    found = find_file(BANDS_FILE)
    if found is None:
        raise ConfigError(BANDS_FILE, None, "the emulator's error bands are missing: run "
                          "`python benchmarks/validate_emulator.py --write-error-bands " f"{BANDS_FILE}`")  # fmt: skip
    return found


def interconnect(profile: HardwareProfile) -> str:
    """``ethernet`` / ``infiniband`` across nodes, ``nvlink`` / ``pcie`` within one node, ``none`` for CPUs only."""
    if len(profile.nodes) > 1:
        return "ethernet" if profile.network.inter_node.latency_us >= TCP_LATENCY_US else "infiniband"
    if all(profile.device(r).kind == "cpu" for r in range(profile.world_size)):
        return "none"
    return "nvlink" if profile.network.intra_node.bandwidth_gbytes_per_s >= NVLINK_GBYTES_PER_S else "pcie"


def workload_class(profile: HardwareProfile, exchange: str) -> str:
    """The validation's workload kind of an arm that exchanges ``exchange`` on ``profile``."""
    if exchange == "neighbour":
        return "gossip_neighbour_exchange"
    if exchange == "all_reduce":
        return "ddp_allreduce_inter_node" if len(profile.nodes) > 1 else "ddp_allreduce_intra_node"
    return exchange  # parameter_server, none: no validation point measures them


def _cell_band(data: dict[str, Any], paper: str, profile: str, method: str, params: dict[str, Any]) -> ErrorBand | None:
    for source, cells in (data.get("cells") or {}).items():
        for cell in cells:
            stands = cell.get("stands_for") or {}
            if (stands.get("paper"), stands.get("profile"), stands.get("method")) != (paper, profile, method):
                continue
            if any(params.get(k) != v for k, v in (stands.get("params") or {}).items()):
                continue
            basis = f"the paper's own cell {cell['id']} ({source}), predicted {cell['signed']:+.1%} out of sample"
            return ErrorBand(abs(float(cell["error"])), float(cell["signed"]), basis, True)
    return None


def arm_band(paper: str, profile: HardwareProfile, method: str, exchange: str, params: dict[str, Any]) -> ErrorBand:
    """The error band of an arm's emulated time: its paper's own cell, else its class, else the uncovered default."""
    path = bands_path()
    data = _bands(path)
    cell = _cell_band(data, paper, profile.name, method, params)
    if cell is not None:
        return cell
    kind, link = workload_class(profile, exchange), interconnect(profile)
    classes = data.get("classes") or {}
    once = data["each_source_once"]
    thin: tuple[str, dict[str, Any]] | None = None
    for key, table in ((f"{kind}/{link}", "workload_interconnect"), (kind, "workload")):
        entry = (classes.get(table) or {}).get(key)
        if entry and int(entry.get("sources", 0)) >= MIN_SOURCES:
            basis = f"class {key}: {entry['points']} points from {entry['sources']} sources, out of sample"
            return ErrorBand(float(entry["median_abs"]), float(entry["median_signed"]), basis, True)
        if entry and thin is None:
            thin = key, entry
    if thin is not None:  # one source's evidence of a large error is kept; it cannot make the band narrower
        key, entry = thin
        rel = max(float(entry["median_abs"]), float(once["median_abs"]))
        basis = (f"class {key} rests on {entry['sources']} source ({entry['points']} points, "
                 f"{float(entry['median_abs']):.1%} out of sample); at least the emulator's error with each source "
                 "counted once")  # fmt: skip
        return ErrorBand(rel, float(entry["median_signed"]), basis, False)
    basis = (f"{kind} over {link} is not covered by the validation: the emulator's error with each source counted "
             "once")  # fmt: skip
    return ErrorBand(float(once["median_abs"]), float(once["median_signed"]), basis, False)

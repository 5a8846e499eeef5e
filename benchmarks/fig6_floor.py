"""Does the host floor decide Fig. 6's strong-scaling trend? The grid's T4 and A100 cells with the floor as
profiled, halved and removed (docs/emulator.md, "Fig. 6's strong scaling, cell by cell").

Why: the floor (``step_floor_ms``) is the sandbox's CPU time for the authors' kernel ops, and the clusters' CPUs are
not stated; if the trend hung on it, the trend would hang on a guess. Each cell is the grid's own
(``methods/decentdp/fig6.py``: its config, its window, the in-process engine), run on a copy of the shipped profile
whose host costs are scaled: ``step_floor_ms`` and ``host_sync_ms`` (the loop's syncs, derived from the same
per-op host time, move with it as the sensitivity sweep's ``overhead`` factor moves them); nothing else changes and
nothing is logged. About a minute of CPU.

    python benchmarks/fig6_floor.py          # the markdown table docs/emulator.md shows
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path
from typing import Any

import yaml
from validation_model import engine_cell_ms

from distrepro.plugins.registry import plugin_module
from distrepro.sensitivity.space import scale_host_costs

REPO = Path(__file__).resolve().parents[1]
SETUPS = ("t4-ib", "a100-ib")
METHODS = {"allreduce": "All-Reduce", "decent-aer": "Decent (AER)"}
FACTORS = (1.0, 0.5, 0.0)


def scaled_profile(setup: str, gpus: int, factor: float, folder: Path) -> Path:
    """A copy of ``hardware_profiles/<setup>-<gpus>.yaml`` (same file and profile name) with every device's
    ``step_floor_ms`` and ``host_sync_ms`` times ``factor``."""
    name = f"{setup}-{gpus}"
    data: dict[str, Any] = yaml.safe_load((REPO / "hardware_profiles" / f"{name}.yaml").read_text(encoding="utf-8"))
    groups = {id(group): group for node in data["nodes"] for group in node["devices"]}  # YAML aliases share one
    for group in groups.values():
        scale_host_costs(group, factor)
    path = folder / f"{factor}" / f"{name}.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return path


def cell_ms(setup: str, gpus: int, method: str, profile: Path) -> float:
    """The grid's cell (its config and window) on ``profile``, by the in-process engine alone (the validation's
    :func:`validation_model.engine_cell_ms`)."""
    fig6 = plugin_module("decentdp", "fig6")
    raw = fig6.cell_config(setup, gpus, method, fig6.cell_steps(method, gpus, setup))
    return engine_cell_ms({**raw, "profile": str(profile)})


def table() -> dict[tuple[str, str], dict[float, list[float]]]:
    """(setup, method) -> floor factor -> ms per iteration at each of the setup's GPU counts."""
    fig6 = plugin_module("decentdp", "fig6")
    out: dict[tuple[str, str], dict[float, list[float]]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for setup in SETUPS:
            for method in METHODS:
                out[setup, method] = {
                    f: [cell_ms(setup, g, method, scaled_profile(setup, g, f, Path(tmp))) for g in fig6.SETUPS[setup]]
                    for f in FACTORS
                }
    return out


def main(argv: list[str] | None = None) -> int:
    argparse.ArgumentParser(description=__doc__.split("\n\n")[0]).parse_args(argv)
    print("| cluster, method | host costs as profiled (16/32/64 T4; 8/16/32 A100) | floor and syncs × 0.5 | neither |")
    print("|---|---|---|---|")
    for (setup, method), rows in table().items():
        cells = [" / ".join(f"{ms:.1f}" for ms in rows[f]) for f in FACTORS]
        print(f"| {setup.split('-')[0].upper()} {METHODS[method]} | " + " | ".join(cells) + " |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

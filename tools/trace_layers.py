"""Regenerate the emulated workloads' per-layer tables (``hardware_profiles/layers/<workload>.csv``).

    python tools/trace_layers.py                 # every workload with a known architecture
    python tools/trace_layers.py resnet50_in100_224 --out OUT_DIR   # one table, into a folder you name

Each architecture runs once on the meta device (no memory, no weights); see
:mod:`distrepro.hardware.layer_tables` for what is counted and how.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from distrepro.hardware.layer_tables import trace, write_table
from distrepro.hardware.traced_models import ARCHITECTURES

OUT = Path(__file__).resolve().parents[1] / "hardware_profiles" / "layers"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("workloads", nargs="*", default=sorted(ARCHITECTURES))
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)
    import torch

    for name in args.workloads:
        build, sample = ARCHITECTURES[name]
        source = (
            f"[L/D] {name}: distrepro.hardware.traced_models architecture traced on the meta device "
            f"(torch {torch.__version__}), one sample of shape {'x'.join(map(str, sample))}"
        )
        table = trace(build, sample, source)
        write_table(table, args.out / f"{name}.csv", f"python tools/trace_layers.py {name}")
        print(
            f"{name}: {len(table.layers)} layers, {table.params / 1e6:.2f} M params, "
            f"{table.forward_flops / 1e9:.3f} GFLOP forward"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())

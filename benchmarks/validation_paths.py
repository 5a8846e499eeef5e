"""Where the emulator's validation reads and writes: the data file, the Fig. 6 grid, the committed error bands."""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DATA = Path(__file__).resolve().parent / "data" / "emulator_points.yaml"
FIG6 = REPO / "reports" / "decentdp" / "fig6.csv"
#: the committed error bands (leave-one-source-out errors per class of measurement), read by the harness
ERROR_BANDS = REPO / "hardware_profiles" / "validation" / "emulator_error.yaml"

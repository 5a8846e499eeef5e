"""The verdict rule on synthetic seeds with known truth: PASS rates of the skew-guarded t-interval at n = 5.

Prints the table of BENCHMARKS.md ("The verdict rule on synthetic seeds with known truth"): a paired difference
whose per-seed values are truth + noise (unit-variance normal, centred exponential, centred lognormal of log-sd 1),
truth exactly on the band's upper edge (a PASS is an error; nominal 2.5 %) or 1.5 and 3 noise sd inside, 4000
experiments per cell from the generators of ``tests/claims/test_skew_guard.py`` (which asserts the same figures).

    PYTHONPATH=. python benchmarks/verdict_rule_calibration.py
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "claims"))

import test_skew_guard as T


def main() -> None:
    print(f"| noise (n = {T.N}) | PASS at the upper edge | 1.5 sd inside | 3 sd inside |")
    print("|---|---|---|---|")
    for kind in ("normal", "exponential", "lognormal"):
        edge, mid, far = (T._values(kind, d, T.COUNT) for d in (0.0, 1.5, 3.0))
        rates = [T._pass_rate(v) for v in (edge, mid, far)]
        print(f"| {kind} | " + " | ".join(f"{100 * r:.1f} %" for r in rates) + " |")


if __name__ == "__main__":
    main()

"""torch's CPU threads in a ``distrepro`` command's processes wait for work asleep (``OMP_WAIT_POLICY=PASSIVE``)
rather than spinning, unless the environment already says how they wait.

Why: torch's CPU wheels run their intra-op threads on GNU OpenMP (``torch/lib/libgomp.so.1``), whose idle threads
spin before they sleep by default. Where the cores are shared (a laptop, a CI runner, the suite's own test and
campaign processes side by side), a spinning thread burns the CPU time its partner needs, and every parallel
operator then waits for a partner that is not running. Measured on 2 shared cores at a load average of 4.2-4.6, a
100-step quickstart run (2 torch threads) took 17-22 s of CPU and 26 s of wall time spinning, 7 s of CPU and 8-12 s
of wall time asleep (BENCHMARKS.md, "Start-up of a one-step run"). A thread asleep takes a few microseconds longer
to start an operator on an idle machine; that is the price. How work is split among threads does not depend on it,
so every computed value is bit-for-bit the same.

How: the command's process sets the variable before anything imports torch (OpenMP reads it once, when torch loads
it), and every process it starts (the watched child, pool workers, ranks) inherits it. A value already in the
environment (``OMP_WAIT_POLICY=ACTIVE`` for a machine of one's own) is kept; ``main()`` called from Python changes
nothing (its caller's torch may already be loaded).
"""

from __future__ import annotations

import os
import sys

#: the environment variable OpenMP reads (the OpenMP specification and the GNU libgomp manual, "OMP_WAIT_POLICY"),
#: and the value set
VARIABLE = "OMP_WAIT_POLICY"
PASSIVE = "PASSIVE"


def wait_passively() -> None:
    """Set ``OMP_WAIT_POLICY=PASSIVE`` for this process and its children unless it is set already; nothing once
    torch is loaded (OpenMP has read its environment by then)."""
    if "torch" not in sys.modules:
        os.environ.setdefault(VARIABLE, PASSIVE)

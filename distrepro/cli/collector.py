"""The cyclic garbage collector of a ``distrepro`` command's process: its youngest generation collected after
50,000 new container objects instead of CPython's 700.

Why: a one-step ``distrepro run`` imports about 3,900 modules (torch, ``torch._dynamo`` for the optimizer's step,
MLflow, SQLAlchemy, pandas), and each import leaves behind thousands of long-lived objects (functions, classes,
dicts). At CPython's thresholds (700, 10, 10) that start-up ran about 1,160 young, 105 middle and 7 full
collections, each full one walking every object the imports had made so far, none finding garbage worth the walk:
about 0.5 s of the 4.1 s of CPU that importing those modules took (Python 3.11, 2 cores; BENCHMARKS.md, "Start-up
of a one-step run"). At 50,000 the same imports run 31, 2 and 0.

What it changes: when unreachable reference cycles are freed, never whether they are, and never a computed value,
so runs stay bit-for-bit the same. Cyclic garbage now waits for at most 50,000 allocations (a few MB of small
objects) before it is freed; memory that is not in a cycle is freed at once, as before (reference counting). A
threshold set higher by whoever starts the process (``gc.set_threshold`` in a ``sitecustomize``), or a collector
switched off, is left as it is.

Only the command's own processes (:mod:`distrepro.cli.console` and the watched child of :mod:`distrepro.cli.watch`)
set it; ``main()`` called from Python leaves its caller's collector alone.
"""

from __future__ import annotations

import gc

#: new container objects (net of those freed) between two collections of the youngest generation
YOUNG_THRESHOLD = 50_000


def collect_less() -> None:
    """Raise the youngest generation's threshold to :data:`YOUNG_THRESHOLD` (the older generations' stay as they
    are: each is collected once per that many collections of the one below)."""
    young, middle, oldest = gc.get_threshold()
    if young and young < YOUNG_THRESHOLD:  # 0 switches the collector off: left so
        gc.set_threshold(YOUNG_THRESHOLD, middle, oldest)

"""Sensitivity of the timing verdicts to the figures nobody measured.

A timing claim's verdict depends on emulated time, and emulated time is a function of the hardware
profile (device speeds, links), the allocation the method chooses for that hardware, the step
counts and the bytes on the wire, not of the training math. So the verdict can be re-derived for
any plausible hardware in milliseconds, without training:

* :mod:`.space`: the uncertain figures (profile ranges, ``paper.yaml`` ``setup.sensitivity``
  assumptions), a Latin-hypercube design and one-at-a-time scans over them, and a profile with a
  setting applied;
* :mod:`.probe`: what one lockstep iteration of an arm does (per-rank compute calls, collectives and
  their bytes), read off the method's own ``train_step`` run against a recording context;
* :mod:`.analytic`: an arm's emulated time on a profile, the engine's clock semantics replayed
  over that plan (validated against the real runs at the profile's central values);
* :mod:`.retime`: the runs of a report re-timed for one setting (tables the verdict engine reads);
* :mod:`.columns`: the columns of a runs table a paper's verdicts read (the sweep's and the report's judging);
* :mod:`.sweep`: every timing claim judged at every setting: share of settings that PASS, tornado,
  flip points, heat map data.
"""

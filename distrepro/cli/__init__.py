"""``distrepro``: the command line, one module per subcommand (:mod:`.run`, :mod:`.reproduce`, :mod:`.plan`,
:mod:`.listing`, :mod:`.report`, :mod:`.calibrate`, :mod:`.test`, :mod:`.preregister`, :mod:`.results`,
:mod:`.ui`), shared helpers in :mod:`.common`, the parser and entry point in :mod:`.main`, the console script (which
ends the process without the interpreter's tear-down) in :mod:`.console`.

    distrepro run CONFIG [--set key.path=value ...] [--seeds 0,1,2] [--no-progress] [--executor local|ray|slurm ...]
    distrepro list                      (paper ids with their arms, methods, datasets, profiles)
    distrepro --version
    distrepro plan CONFIG [--set key.path=value ...] [--json]
    distrepro plan PAPER [--scale proxy|mid|gpu|paper]   (every arm x seed, emulated hours, GPU-hours)
    distrepro reproduce PAPER [--seeds 0,1,2] [--with ARMS] [--scale proxy|mid|gpu|paper] [--sensitivity] [--check]
    distrepro reproduce PAPER --resume [RUN_ID]   (continue a stopped reproduction: its unfinished arms, the report)
    distrepro extras PAPER [ARM ...]
    distrepro test METHOD [...] [--root DIR]   (the generated tests of a method plugin; needs pytest)
    distrepro report PAPER [--campaign RUN_ID ...] [--out DIR] [--baseline ARM] [--no-log] [--check] [--sensitivity]
    distrepro sensitivity PAPER [--samples N] [--campaign RUN_ID ...] [--no-progress]   (= report --sensitivity)
    distrepro calibrate WORKLOAD [--device cpu|cuda] [--batches 1,2,4,8] [--out FILE]   (step time here -> [M] profile)
    distrepro ui [--port N] [--host H] [--store URI]   (the MLflow UI; prints the address of each paper's runs table)

Errors a user can cause (bad config, profile, dataset path, unknown method, a tracking store that
cannot be used, a ``--resume`` that does not fit) are printed as one line naming the file, URI or
field, with exit status 2; nothing already logged to MLflow is lost. ``run`` checks the store and
its ``--resume`` target before importing torch or mlflow (seconds on a busy machine), so such a
mistake is reported at once.

Every command takes ``--root DIR`` (repeatable; or ``DISTREPRO_PATH``): a folder of the user's own
``methods/``, ``datasets/``, ``hardware_profiles/`` and ``configs/``, looked up beside the shipped ones.
"""

from __future__ import annotations

from distrepro.cli.main import build_parser, main

__all__ = ["build_parser", "main"]

"""Paper claims as data, and the engine that judges them from tracked runs.

Kept apart from training on purpose (MLPerf keeps its checkers apart from the reference code):
a verdict must be reproducible from the MLflow store alone, and a change to the judging rules must
never require re-running anything.

* :mod:`distrepro.claims.schema` — the ``paper.yaml`` format (``setup:`` and ``claims:``), validated
  with errors that name the file and the field (``claims[2].direction``);
* :mod:`distrepro.claims.runs` — runs read back from MLflow into tidy DataFrames;
* :mod:`distrepro.claims.verdicts` — statistics over seeds and the PASS / FAIL / INCONCLUSIVE rules.

The package re-exports nothing: importing one module (``intervals``, for the arms' aggregates at the end of every
``run``) must not load the ``paper.yaml`` schema and the judging rules with it (start-up time).
"""

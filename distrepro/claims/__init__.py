"""Paper claims as data, and the engine that judges them from tracked runs.

Kept apart from training on purpose (MLPerf keeps its checkers apart from the reference code):
a verdict must be reproducible from the MLflow store alone, and a change to the judging rules must
never require re-running anything.

* :mod:`distrepro.claims.schema` — the ``paper.yaml`` format (``setup:`` and ``claims:``), validated
  with errors that name the file and the field (``claims[2].direction``);
* :mod:`distrepro.claims.runs` — runs read back from MLflow into tidy DataFrames;
* :mod:`distrepro.claims.verdicts` — statistics over seeds and the PASS / FAIL / INCONCLUSIVE rules.
"""

from __future__ import annotations

from distrepro.claims.papers import PaperInfo, find_paper
from distrepro.claims.schema import (
    CLAIM_KINDS,
    Arm,
    Claim,
    PaperSpec,
    Setup,
    load_paper_file,
    validate_paper,
)
from distrepro.claims.verdicts import Verdict, evaluate_claim, evaluate_claims

__all__ = [
    "CLAIM_KINDS",
    "Arm",
    "Claim",
    "PaperInfo",
    "PaperSpec",
    "Setup",
    "Verdict",
    "evaluate_claim",
    "evaluate_claims",
    "find_paper",
    "load_paper_file",
    "validate_paper",
]

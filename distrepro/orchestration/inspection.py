"""Runs that a check inspects rather than logs: the conformance tests' view into a trained method.

The conformance checks (:mod:`distrepro.conformance.checks`) sit above orchestration and may not reach into an engine
(`docs/architecture.md`); when a failed check wants to say *why* (which tensor-holding attributes a method's
``state_dict`` leaves out), it asks here for the methods as they stand after a short in-process run.
"""

from __future__ import annotations

from distrepro.api.method import Method
from distrepro.engine.inprocess.run import InProcessEngine
from distrepro.job.resolve import Job


def methods_after_training(job: Job) -> list[Method]:
    """Train ``job`` in-process, nothing logged, and return every worker's method instance as training left it."""
    harness = InProcessEngine().harness(job)
    harness.run()
    return [slot.method for slot in harness.slots]

"""The in-process engine: every worker a greenlet of one process, on a deterministic virtual-time scheduler."""

from distrepro.engine.inprocess.run import InProcessEngine

__all__ = ["InProcessEngine"]

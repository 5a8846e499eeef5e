"""Per-paper reports built from MLflow alone: claims table, figures, environment, deviations.

:func:`suite.report.build.build_report` is the entry point (``distrepro report <paper>``).
"""

from __future__ import annotations

from suite.report.build import Report, build_report, write_report

__all__ = ["Report", "build_report", "write_report"]

"""Per-paper reports built from MLflow alone: claims table, figures, environment, deviations.

:func:`distrepro.report.build.build_report` is the entry point (``distrepro report <paper>``).
"""

from __future__ import annotations

from distrepro.report.build import Report, build_report, write_report

__all__ = ["Report", "build_report", "write_report"]

"""What ``distrepro reproduce decentdp`` writes besides the arms' runs: the Fig. 6 grid (:mod:`.fig6`)."""

from __future__ import annotations

from pathlib import Path

from distrepro import api

from . import fig6


def build(ctx: api.ReportContext) -> list[Path]:
    """``reports/decentdp/fig6.csv`` and ``fig6.png``; the grid is the same at every scale (time is emulated)."""
    return fig6.build(ctx)


def describe(ctx: api.ReportContext) -> list[api.Product]:
    """The caption the report shows under ``fig6.png`` (its numbers, ``fig6.csv``, are named beside it)."""
    return [api.Product("fig6.png", fig6.CAPTION)]

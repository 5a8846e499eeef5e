"""Metric keys read as words with units, in one table: known keys, ranked families, claim units, fallbacks."""

from __future__ import annotations

import math

import pytest

from distrepro import metrics as M
from distrepro.report.figures.metric_labels import axis_label, describe, shown


@pytest.mark.parametrize(
    ("key", "label"),
    [
        ("final/val_accuracy", "validation accuracy (%)"),
        (M.VAL_LOSS, "validation loss (nats)"),
        (M.EMULATED_S, "emulated time (s)"),
        (M.FINAL_EMULATED_S, "emulated time for the budget (s)"),
        (M.EPOCH, "epochs"),  # the unit is the word: not "epochs (epochs)"
        (M.BYTES_TOTAL, "bytes sent, all workers (MB)"),
        ("alloc/3/share", "share of the data, worker 3 (%)"),
        ("alloc/<r>/share", "share of the data, worker <r> (%)"),
        ("worker/12/idle_s", "idle time of worker 12 (s)"),
        ("emu_ms/val_loss", "validation loss (nats)"),
        ("replica_val_accuracy_std", "validation accuracy, std over replicas (%)"),
        (M.CONSENSUS_DECAY_RATE, "consensus-distance decay rate (e-folds per gradient per worker)"),
        ("x", "ratio (×)"),
        ("fraction", "share (%)"),
    ],
)
def test_known_keys_read_as_words_with_units(key: str, label: str) -> None:
    assert axis_label(key) == label


def test_unknown_keys_fall_back_to_the_key_unitless() -> None:
    assert axis_label("method/moment_refreshes") == "method/moment_refreshes"
    assert axis_label("alloc/2/unheard_of") == "alloc/2/unheard_of"
    assert shown(4.356, "method/moment_refreshes") == "4.356"


def test_every_logged_harness_metric_has_words() -> None:
    """A harness metric added to distrepro.metrics without words here would reach a figure as its key."""
    exact = [*M.EVAL, *M.FINAL_EXTRA, *M.SUMMARIES, *M.DERIVED]
    ranked = [M.worker(0, f) for f in (*M.WORKER_FIELDS, M.DECLARED_SPEED)] + [M.alloc(0, f) for f in M.ALLOC_FIELDS]
    missing = [k for k in [*exact, *ranked] if describe(k).words == k]
    assert missing == []


def test_numbers_carry_their_unit() -> None:
    assert shown(0.7234, M.VAL_ACCURACY) == "72.3%"
    assert shown(0.0116, "final/val_accuracy", difference=True) == "+1.16 pts"
    assert shown(-0.5, M.FINAL_EMULATED_S, difference=True) == "−0.5 s"
    assert shown(4.356, M.FINAL_EMULATED_S) == "4.356 s"
    assert shown(2.31, "x") == "2.31×"
    assert shown(3.2e6, M.BYTES_TOTAL) == "3.2 MB"
    assert shown(math.inf, "x") == "∞×"
    assert shown(None, "x") == shown(math.nan, "x") == "–"

"""The report in MLflow: its files once per reproduction, its verdicts as tags on each arm's run.

``distrepro reproduce`` runs its arms under one umbrella run, so the report (megabytes: its figures are
inlined in the HTML) is logged there once rather than on each of up to 18 arm runs; a campaign from a
plain ``distrepro run`` holds its own copy. Each arm's campaign run gets the tally, one tag ``distrepro.verdicts``
with every claim it takes part in and its verdict, a ``verdict.<claim id>`` tag per *headline* claim (to filter
on), and the tag :data:`~distrepro.tracking.ui_view.HEADLINE_TAG` with the verdicts of its headline claims in one
cell, which the shared runs-table view shows beside the arm's accuracy and emulated time (a column per claim did
not fit a 1,400 px window: QSR has 8 headline claims); the reproduction's run gets every headline claim in that
tag, and the headline tally as metrics (``headline_pass``, ``headline_fail``, ``headline_inconclusive``).
"""

from __future__ import annotations

import logging
import re
import time
from typing import Any

from distrepro.claims.evidence import group_of
from distrepro.claims.runs import RunSet
from distrepro.report import stage
from distrepro.tracking.mlflow_client import REPRODUCTION_TAG
from distrepro.tracking.ui_view import HEADLINE_TAG

_log = logging.getLogger(__name__)

_TAG_UNSAFE = re.compile(r"[^\w.\-]")


def claim_arms(claim: Any) -> set[str]:
    """The arms a claim compares (its arm and baseline, or an ordering's arms)."""
    names = [getattr(claim, "arm", None), getattr(claim, "baseline", None), *(getattr(claim, "arms", None) or [])]
    return {n for n in names if n}


#: the order of the verdict words in :data:`HEADLINE_TAG` (the tally's; DEPENDS: claims.shown)
_WORDS = ("PASS", "FAIL", "DEPENDS", "INCONCLUSIVE")


def headline_cell(words: dict[str, str]) -> str:
    """``PASS A-C1 A-C2 · FAIL A-C3`` from claim id → verdict word: one word per verdict, not one per claim, so
    that four claims fit a column a quarter of a 1,400 px window wide."""
    order = [*_WORDS, *sorted(set(words.values()) - set(_WORDS))]
    groups = [(w, [c for c, word in words.items() if word == w]) for w in order]
    return " · ".join(f"{w} {' '.join(ids)}" for w, ids in groups if ids)


def headline_words(report: Any) -> dict[str, str]:
    """Claim id → the verdict word the report shows (DEPENDS where an assumed hardware figure decides it), for
    every headline claim, in the paper's order."""
    shown = report.display()
    by_id = {v.claim_id for v in report.verdicts}
    return {c.id: shown.of(c.id).word for c in report.claims if c.id in by_id and group_of(c) == "headline"}


def verdict_tags(rs: RunSet, report: Any, labels: dict[str, str]) -> dict[str, dict[str, str]]:
    """Campaign run id → ``verdict.<claim id>`` tags and :data:`HEADLINE_TAG` for the headline claims its arm takes
    part in, and :data:`ALL_VERDICTS_TAG` for all of them, so the MLflow runs table can show (and filter on) each
    arm's verdicts."""
    by_id = {v.claim_id: v.verdict for v in report.verdicts}
    words = headline_words(report)
    headline = set(words)
    arms_of: dict[str, set[str]] = {}
    for run_id, parent in zip(rs.runs["run_id"], rs.runs["parent_run_id"], strict=True):
        if isinstance(parent, str):
            arms_of.setdefault(parent, set()).add(labels.get(run_id, "").split(" @ ")[0])
    out: dict[str, dict[str, str]] = {}
    for parent in rs.campaigns:
        arms = arms_of.get(parent, set())
        mine = [c for c in report.claims if c.id in by_id and claim_arms(c) & arms]
        out[parent] = {"verdict." + _TAG_UNSAFE.sub("_", c.id): by_id[c.id] for c in mine if c.id in headline}
        if out[parent]:
            out[parent][HEADLINE_TAG] = headline_cell({c.id: words[c.id] for c in mine if c.id in headline})
        if mine:  # every claim of the arm in one column: a column per claim left the table sparse
            out[parent][ALL_VERDICTS_TAG] = " · ".join(f"{c.id} {by_id[c.id]}" for c in mine)
    return out


#: one tag with every claim the arm takes part in and its verdict (``A-C1 PASS · A-C3 FAIL``)
ALL_VERDICTS_TAG = "distrepro.verdicts"


def tally_metrics(report: Any) -> dict[str, float]:
    """The headline tally as metrics of the reproduction's run (``headline_pass`` …), so its row has numbers."""
    counts = {"PASS": 0, "FAIL": 0, "INCONCLUSIVE": 0}
    for v in report.verdicts:
        if report.group(v) == "headline":
            counts[v.verdict] += 1
    return {f"headline_{k.lower()}": float(n) for k, n in counts.items()}


def _umbrella(rs: RunSet, campaign: str) -> str | None:
    """The ``reproduce`` run a campaign ran for, if any (its tag ``distrepro.reproduction``)."""
    return rs.client.get_run(campaign).data.tags.get(REPRODUCTION_TAG) or None


def log_report(rs: RunSet, report: Any, labels: dict[str, str]) -> list[str]:
    """Log the report files under ``report/`` once per reproduction, and its verdicts as tags; returns the run
    ids the files went to.

    Campaigns of one ``distrepro reproduce`` share an umbrella run: the files go there once (a report is
    megabytes; 18 arms used to hold 18 copies). A campaign run on its own (``distrepro run``) gets the files
    itself. Every campaign run gets the tally (``distrepro.report.verdicts``) and the verdict tags of
    :func:`verdict_tags`."""
    from mlflow.entities import RunTag

    per_campaign = verdict_tags(rs, report, labels)
    words = headline_words(report)
    targets: list[str] = []
    stage.enter("logging to MLflow", "(the verdicts as tags)", total=len(rs.campaigns), unit="campaign run")
    for parent in rs.campaigns:
        try:
            umbrella = _umbrella(rs, parent)
            tags = {"distrepro.report.verdicts": report.summary(), **per_campaign.get(parent, {})}
            rs.client.log_batch(parent, tags=[RunTag(k, v) for k, v in tags.items()])
        except Exception as exc:
            _log.warning("could not tag campaign run %s with the verdicts: %s", parent, exc)
            continue
        finally:
            stage.advance()
        targets.append(umbrella or parent)
    logged = []
    stage.count("uploading the report's files", len(dict.fromkeys(targets)), unit="run")
    for run_id in dict.fromkeys(targets):
        try:
            rs.client.log_artifacts(run_id, str(report.out_dir), artifact_path="report")
            rs.client.set_tag(run_id, "distrepro.report.verdicts", report.summary())
            if run_id not in rs.campaigns:  # the reproduction's own run: its row shows every headline verdict
                from mlflow.entities import Metric

                now = int(time.time() * 1000)
                metrics = [Metric(k, v, now, 0) for k, v in tally_metrics(report).items()]
                headline = [RunTag(HEADLINE_TAG, headline_cell(words))] if words else []
                rs.client.log_batch(run_id, metrics=metrics, tags=headline)
            logged.append(run_id)
        except Exception as exc:  # the files on disk are still complete; say why MLflow lacks them
            _log.warning("could not log the report to run %s: %s", run_id, exc)
        stage.advance()
    return logged

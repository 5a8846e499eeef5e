"""Whether a ``RESULTS.md`` still describes the checkout: the marks each paper's section carries, and their check.

Each paper's section opens with two HTML comments: the digest of its inputs (paper.yaml and the arms' run configs,
:func:`~distrepro.report.results_inputs.inputs_digest`) and, in a ``frozen-inputs`` mark, one digest per input a
pre-registration freezes (:func:`~distrepro.report.results_inputs.frozen_digests`). They are written and read here,
in one place, so the format the writer uses and the one the check parses cannot drift apart. ``distrepro results
--check`` and a test call :func:`check_results`; a benchmark that follows RESULTS.md through its history reads the
marks with :func:`frozen_marks`.
"""

from __future__ import annotations

import re
from pathlib import Path

from distrepro.claims.papers import find_paper, known_papers
from distrepro.report.results_inputs import frozen_digests, inputs_digest, kind_slug

#: the command that rewrites the file from a store holding the runs
REGENERATE = "MLFLOW_TRACKING_URI=<store with the runs> distrepro results"
_INPUTS_MARK = re.compile(r"<!-- inputs paper=(?P<paper>\S+) digest=(?P<digest>[0-9a-f]+) -->")
_FROZEN_MARK = re.compile(r"<!-- frozen-inputs paper=(?P<paper>\S+) (?P<digests>[^>]*?) ?-->")


def input_marks(paper: str, digest: str, root: Path | None = None) -> list[str]:
    """The two marks that open ``paper``'s section: its inputs ``digest`` and the checkout's frozen-input digests."""
    frozen = frozen_digests(find_paper(paper, root), root)
    mark = " ".join(f"{kind_slug(kind)}={value}" for kind, value in frozen.items())
    return [f"<!-- inputs paper={paper} digest={digest} -->", f"<!-- frozen-inputs paper={paper} {mark} -->"]


def frozen_marks(text: str) -> dict[str, dict[str, str]]:
    """Paper → {kind slug: digest} of each ``frozen-inputs`` mark in ``text`` (a RESULTS.md), as written."""
    return {
        m["paper"]: dict(pair.split("=", 1) for pair in m["digests"].split() if "=" in pair)
        for m in _FROZEN_MARK.finditer(text)
    }


def check_results(text: str, root: Path | None = None) -> tuple[list[str], list[str]]:
    """What makes ``text`` (a RESULTS.md) out of date with the checkout, and what it cannot vouch for.

    Problems (``results --check`` exits 1), one line per paper and input: a missing or extra section, a changed
    paper.yaml or arm config (the ``inputs`` digest), and, for a section with a ``frozen-inputs`` mark, each frozen
    input changed since (setup, profiles with ranges, the error band, the emulator and claims code). Warnings: a
    section written before the mark existed, whose runs were made before inputs were frozen: what the mark covers
    beyond paper.yaml and the configs is not checked there until the file is regenerated."""
    recorded = {m["paper"]: m["digest"] for m in _INPUTS_MARK.finditer(text)}
    marks = frozen_marks(text)
    problems, warnings = [], []
    known = known_papers(root)
    for paper in known:
        info = find_paper(paper, root)
        now = inputs_digest(info, root)
        if paper not in recorded:
            problems.append(f"{paper}: no section")
            continue
        if recorded[paper] != now:
            problems.append(f"{paper}: inputs {recorded[paper]} recorded, {now} now (paper.yaml or a config changed)")
        if paper not in marks:
            warnings.append(
                f"{paper}: section made before inputs were frozen (setup, profiles, error band and code not "
                f"checked); regenerate it: {REGENERATE}"
            )
            continue
        for kind, digest in frozen_digests(info, root).items():
            then = marks[paper].get(kind_slug(kind))
            if then != digest:
                problems.append(f"{paper}: {kind} changed since the runs reported here ({then} recorded, {digest} now)")
    problems += [f"{p}: no such paper any more" for p in sorted(set(recorded) - set(known))]
    return problems, warnings


def stale_papers(text: str, root: Path | None = None) -> list[str]:
    """What makes ``text`` (a RESULTS.md) out of date with the checkout: one line per paper and input, empty when
    current (the problems of :func:`check_results`)."""
    return check_results(text, root)[0]

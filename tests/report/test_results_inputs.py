"""What a paper's runs depend on (distrepro/report/results_inputs.py): data, not bytes; the arms and configs at a
scale, not the claims."""

from __future__ import annotations

from pathlib import Path

from distrepro.claims.papers import find_paper
from distrepro.report.results_inputs import configs_digest


def test_the_configs_digest_reads_data_not_bytes_and_leaves_the_claims_out(paper_root: Path) -> None:
    info = find_paper("tinypaper", paper_root)

    def edited(old: str, new: str):  # type: ignore[no-untyped-def]
        return lambda p: p.read_text().replace(old, new)

    base = configs_digest(info, "proxy", lambda p: p.read_text(), paper_root)
    assert len(base) == 12
    assert configs_digest(info, "proxy", lambda p: "# reworded\n" + p.read_text(), paper_root) == base
    # a claim's margin decides verdicts, which the report judges on the current claims, not what the runs did
    assert configs_digest(info, "proxy", edited("rel_tolerance: 0.2", "rel_tolerance: 0.25"), paper_root) == base
    assert configs_digest(info, "proxy", edited("steps: 4", "steps: 5"), paper_root) != base  # a run config
    assert configs_digest(info, "proxy", edited("period: 2", "period: 3"), paper_root) != base  # an arm
    assert configs_digest(info, "proxy", lambda p: None, paper_root) != base  # files the commit did not have

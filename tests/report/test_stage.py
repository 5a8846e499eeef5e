"""The report stage names its step with a count and, once a unit is done, an estimate of the rest
(:mod:`distrepro.report.stage`), in a line as each step starts and in the heartbeat between."""

from __future__ import annotations

import io
import time
from pathlib import Path

from test_report import SYNTH_CLAIMS, synthetic_runset

from distrepro.claims.papers import PaperInfo
from distrepro.claims.schema import validate_paper
from distrepro.report import stage
from distrepro.report.build import PRODUCTS, write_report
from distrepro.report.figure_set import FIGURE_FILES


class FakeClock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def _wait_for(out: io.StringIO, text: str, limit_s: float = 60.0) -> bool:
    """Whether ``text`` appears in ``out`` (a guard against a hang, not a timing assertion)."""
    end = time.monotonic() + limit_s
    while text not in out.getvalue() and time.monotonic() < end:
        time.sleep(0.01)
    return text in out.getvalue()


def test_a_report_names_each_step_as_it_starts_with_its_count(tmp_path: Path, exact_emulator: None) -> None:
    out = io.StringIO()
    info = PaperInfo("synth", validate_paper(SYNTH_CLAIMS))
    with stage.watch("report for synth", stream=out, every_s=3600):  # no heartbeat here: the step lines alone
        write_report(info, synthetic_runset(), tmp_path / "synth", root=tmp_path)
    lines = [line.split("] ", 1)[1] for line in out.getvalue().splitlines()]
    assert all(line.startswith("[report for synth ") for line in out.getvalue().splitlines())
    assert lines[0] == "step 3 of 7, judging 4 claims"
    assert lines[1].startswith("step 3 of 7, judging 4 claims, at proxy")
    assert f"step 4 of 7, drawing the figures: {len(FIGURE_FILES)} figures" in lines
    assert lines[-2].startswith("step 6 of 7, writing the report (") and f", {len(PRODUCTS)} files)" in lines[-2]
    assert lines[-1] == f"{lines[-2]}, saving the files"
    assert stage.describe() == ""  # the silent tracker is back: a library call prints nothing


def test_the_heartbeat_repeats_the_step_with_its_count_and_an_estimate() -> None:
    """A fake slow step of 10 figures, 2 drawn in 8 s of an injected clock: the heartbeat (every 10 ms here) says
    where it is and about how long the other 8 take."""
    clock, out = FakeClock(), io.StringIO()
    with stage.watch("report for chao", stream=out, every_s=0.01, clock=clock):
        stage.enter("drawing the figures", total=10, unit="figure")
        clock.t += 8
        stage.advance(2)
        said = "report for chao: step 4 of 7, drawing the figures: 2 of 10 figures done, about 30 s left (0m08s"
        assert _wait_for(out, said)
    beats = [line for line in out.getvalue().splitlines() if line.startswith("[alive ")]
    assert beats and all("report for chao: step 4 of 7, drawing the figures: " in line for line in beats)


def test_no_estimate_before_the_first_unit_is_done() -> None:
    with stage.watch("report for x", stream=io.StringIO(), every_s=3600, clock=FakeClock()):
        stage.enter("judging", "4 claims")
        stage.count("at proxy", 4, unit="claim")
        assert stage.describe() == "step 3 of 7, judging 4 claims, at proxy: 0 of 4 claims done (0m00s in this step)"


def test_the_hardware_checks_phases_become_counted_parts_of_its_step() -> None:
    clock = FakeClock()
    with stage.watch("report for x", stream=io.StringIO(), every_s=3600, clock=clock):
        stage.enter("the hardware check", "of 3 timing claims (12 runs)")
        phases = stage.StagePhases()  # what distrepro.sensitivity.dependence reports to
        phases.phase("re-timing the runs at 32 hardware settings", 32)
        clock.t += 10
        phases.advance(8)
        assert stage.describe() == (
            "step 2 of 7, the hardware check of 3 timing claims (12 runs), re-timing the runs at 32 hardware "
            "settings: 8 of 32 done, about 30 s left (0m10s in this step)"
        )

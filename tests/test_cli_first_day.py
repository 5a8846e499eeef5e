"""What a researcher meets on the first day: ``distrepro plan PAPER``, and slips answered with the closest names."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from distrepro.cli import main
from distrepro.errors import ConfigError, DistreproError, PluginError, did_you_mean

REPO = Path(__file__).resolve().parents[1]


def _number(text: str) -> float:
    return float(text.replace(",", ""))


def test_plan_of_a_paper_at_paper_scale_prints_its_total_gpu_hours(capsys: pytest.CaptureFixture[str]) -> None:
    """``distrepro plan qsr --scale paper``: one line per arm (seeds x emulated time, GPU-hours), the total in
    GPU-hours, the claims' scales, and the warning that the recipe would train on the CPU."""
    from distrepro.claims.papers import find_paper
    from distrepro.orchestration.plan import build_plan
    from distrepro.reproduction.selection import arm_overrides

    assert main(["plan", "qsr", "--scale", "paper"]) == 0
    out, _ = capsys.readouterr()
    total = re.search(r"^total: (\d+) runs, .*?([\d,.]+) GPU-hours", out, re.M)
    assert total is not None, out
    arms = dict(re.findall(r"^  (\S+) .* ([\d,.]+) GPU-hours$", out, re.M))
    assert "qsr" in arms and "r152_qsr4" in arms and len(arms) == 13, out
    assert _number(total.group(2)) == pytest.approx(sum(_number(v) for v in arms.values()), abs=0.1 * len(arms))
    # the QSR arm, priced here from the plan of its config: seeds x emulated seconds x the profile's GPUs
    info = find_paper("qsr")
    path = REPO / "methods" / "qsr" / "configs" / "qsr.paper.yaml"
    plan = build_plan(path, arm_overrides(info, "qsr", "paper"))
    gpu_h = len(plan["config"]["seeds"]) * plan["time"]["total_s"] * plan["cluster"]["gpus"] / 3600
    assert plan["cluster"]["gpus"] == 16 and 1000 < gpu_h < 2000
    assert _number(arms["qsr"]) == pytest.approx(gpu_h, abs=0.06)
    assert re.search(r"^  Q1 \(speedup\): paper \(this scale\)", out, re.M), out
    assert re.search(r"^warning: 13 arm\(s\) .*emulates 16 GPUs but device: cpu .*--set device=cuda", out, re.M)


def test_plan_of_a_paper_adds_the_gpu_hours_with_the_slowest_of_p(capsys: pytest.CaptureFixture[str]) -> None:
    """QSR's paper-scale profiles declare noise: beside the central GPU-hours the total says what the slowest of p
    at every wait adds (each arm's ``expected`` plan), and it adds a few per cent, not nothing and not a multiple."""
    from distrepro.reproduction.paper_plan import plan_paper

    plan = plan_paper("qsr", "paper")
    totals = plan["totals"]
    assert totals["gpu_h"] < totals["expected_gpu_h"] < 1.1 * totals["gpu_h"]
    assert totals["expected_gpu_h"] == pytest.approx(sum(a.get("expected_gpu_h", a["gpu_h"]) for a in plan["arms"]))
    assert main(["plan", "qsr", "--scale", "paper"]) == 0
    out, _ = capsys.readouterr()
    line = re.search(r"^total: .*; ([\d,.]+) GPU-hours with the slowest of p at every wait", out, re.M)
    assert line is not None and _number(line.group(1)) == pytest.approx(totals["expected_gpu_h"], abs=0.1), out


def test_plan_of_a_config_file_works_as_before(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", "configs/quickstart.yaml"]) == 0
    out, _ = capsys.readouterr()
    assert "lr:" in out and "time:" in out and re.search(r"^cluster:\n  profile: ", out, re.M), out
    assert main(["plan", "configs/quickstart.yaml", "--scale", "paper"]) == 2
    assert "--scale goes with a paper id" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("target", "said"),
    [
        ("qsrr", "unknown paper 'qsrr'; did you mean 'qsr'?"),
        ("quickstrat.yaml", "run config not found; did you mean 'configs/quickstart.yaml'?"),
    ],
)
def test_plan_of_an_unknown_name_suggests_the_closest(
    target: str, said: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["plan", target]) == 2
    err = capsys.readouterr().err
    assert said in err and len(err.strip().splitlines()) == 1, err


def test_an_unknown_paper_is_refused_before_torch_or_mlflow_is_imported() -> None:
    """The paper.yaml files alone answer a slip: the refusal comes before the slow imports."""
    code = (
        "import sys\nfrom distrepro.cli import main\nrc = main(['reproduce', 'chaos'])\n"
        "print(rc, 'torch' in sys.modules, 'mlflow' in sys.modules)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=300)
    assert done.stdout.split() == ["2", "False", "False"], done
    assert done.stderr.strip() == (
        "distrepro: error: unknown paper 'chaos'; did you mean 'chao'? (known: acid, cadp, chao, decentdp, qsr)"
    )


def test_a_method_folder_or_another_case_reads_as_its_paper() -> None:
    from distrepro.plugins.catalog import resolve_paper

    assert resolve_paper("chao") == ("chao", None)
    assert resolve_paper("chao_alloc") == ("chao", "chao_alloc is the method of paper 'chao'")
    assert resolve_paper("Chao") == ("chao", "'Chao' read as paper 'chao'")
    assert resolve_paper("nothing-like-it", strict=False) == ("nothing-like-it", None)
    with pytest.raises(DistreproError, match="did you mean 'chao'"):
        resolve_paper("chao_aloc")  # a slip in a method folder's name suggests its paper


def test_extras_takes_the_method_folder_and_says_so(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["extras", "chao_alloc"]) == 0
    assert "chao_alloc is the method of paper 'chao'" in capsys.readouterr().err


def test_unknown_methods_and_profiles_suggest_the_closest() -> None:
    from distrepro.plugins import registry, roots

    with pytest.raises(PluginError, match=r"unknown method 'ar_sdg'; did you mean 'ar_sgd'\?"):
        registry.get_method("ar_sdg")
    with pytest.raises(ConfigError, match=r"hardware profile not found; did you mean 'homogeneous-4'\?"):
        roots.find_profile("homogenous-4")
    assert did_you_mean("QSR", ["qsr", "acid"]) == "; did you mean 'qsr'?"
    assert did_you_mean("zzz", ["qsr"]) == ""


def test_list_shows_the_scales_each_arm_runs_at(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["list"]) == 0
    out = capsys.readouterr().out.split("methods:")[0]
    qsr = out.split("  qsr ")[1]
    assert re.search(r"^\s+proxy mid gpu paper: parallel, const, qsr,", qsr, re.M), qsr
    assert re.search(r"^\s+proxy mid paper: postlocal$", qsr, re.M), qsr
    assert re.search(r"^\s+paper: r152_parallel, r152_const2, r152_qsr2, r152_const4, r152_qsr4$", qsr, re.M), qsr


def test_list_leaves_out_a_copy_of_the_template_until_it_names_its_paper(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    shutil.copytree(REPO / "methods" / "_template", tmp_path / "methods" / "my_method")
    paper = tmp_path / "methods" / "my_method" / "paper.yaml"
    paper.write_text(paper.read_text(encoding="utf-8").replace("_template", "my_method"), encoding="utf-8")
    assert main(["list", "--root", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    papers, methods = out.split("methods:")[0], out.split("methods:")[1]
    assert "Title of the paper" not in papers and re.search(r"^\s+my_method\s", methods, re.M)
    assert f"(not listed: {paper} still has the template's citation" in papers


def test_the_arm_line_counts_every_finished_seed_after_a_resume() -> None:
    from distrepro.cli.reproduce import _seeds_note

    resumed = SimpleNamespace(cells=[object()], finished_seeds=(0, 1, 2))
    assert _seeds_note(resumed, skipped=False) == " (3 seed(s), 1 trained in this session)"  # type: ignore[arg-type]
    fresh = SimpleNamespace(cells=[object(), object()], finished_seeds=(0, 1))
    assert _seeds_note(fresh, skipped=False) == " (2 seed(s))"  # type: ignore[arg-type]
    assert _seeds_note(fresh, skipped=True) == " (finished before: skipped)"  # type: ignore[arg-type]


def test_distrepro_test_ends_with_one_reason_per_failure() -> None:
    from distrepro.conformance.runner import FailureReasons, reason_of

    reasons = FailureReasons()
    crash = SimpleNamespace(message="AssertionError: state_dict() leaves out: residual (attributes ...)\nmore")
    for when, failed in (("setup", False), ("call", True), ("teardown", False)):
        longrepr = SimpleNamespace(reprcrash=crash)
        reasons.pytest_runtest_logreport(
            SimpleNamespace(
                failed=failed, longrepr=longrepr, when=when, nodeid="t.py::test_checkpoint_round_trip[mine]"
            )
        )
    assert reasons.lines == [
        "FAILED test_checkpoint_round_trip[mine]: state_dict() leaves out: residual (attributes ...)"
    ]
    assert reason_of("assert 0.1 > 0.2") == "assert 0.1 > 0.2"
    assert len(reason_of("x" * 1000)) == 300

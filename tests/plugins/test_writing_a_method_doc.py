"""``docs/writing-a-method.md`` is tested: every command of its ``bash`` blocks runs, as written, in order.

The guide's commands start from a checkout and write to ``~/distrepro-plugins``; here ``HOME`` is a temporary
folder and the working folder a temporary one that holds the checkout's ``methods/``, ``tests/`` and
``pyproject.toml`` (links), so the template is copied to a temporary root, renamed, listed, run, planned,
reproduced (its report lands in the temporary folder) and put through its generated tests, and nothing is
written into the repository. MLflow goes to a temporary store. Each line runs in ``bash`` as written; the
``distrepro`` it finds first on ``PATH`` forks the command from a pre-imported zygote (:mod:`zygote_shell` says why
that is the process the console script starts), so six commands pay their imports once.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from hang_guard import hang_guard
from zygote_shell import distrepro_from_a_zygote

REPO = Path(__file__).resolve().parents[2]
GUIDE = REPO / "docs" / "writing-a-method.md"


def guide_commands() -> list[str]:
    """Every command of the guide's ``bash`` blocks, in order (comments and blank lines dropped)."""
    text = GUIDE.read_text(encoding="utf-8")
    commands = []
    for block in re.findall(r"```bash\n(.*?)```", text, flags=re.S):
        for line in block.splitlines():
            line = re.sub(r"\s+#.*$", "", line).strip()
            if line and not line.startswith("#"):
                commands.append(line)
    return commands


def test_the_guide_names_the_working_run_command_and_every_topic() -> None:
    commands = guide_commands()
    runs = [c for c in commands if c.startswith("distrepro run ")]
    assert runs and all("--set 'method_params={}'" in c for c in runs if "--set method=" in c)
    assert any(c.startswith("distrepro plan ") for c in commands)
    assert any(c.startswith("distrepro reproduce ") for c in commands)
    assert any(c.startswith("distrepro test my_method") for c in commands)
    assert any(c.startswith("mypy --explicit-package-bases") for c in commands)  # the type-check line is run
    assert any("pytest tests/engine/test_engine_agreement.py" in c for c in commands)
    doc = GUIDE.read_text(encoding="utf-8")
    for topic in (
        "api.PeakLR",  # the LR rule
        "declares no peak LR",
        "ctx.build_optimizer(parameters, default: api.OptimizerConfig)",
        "ctx.register_optimizer(opt)",
        "state_dict",  # saving tensor state
        "load_state_dict",
        "distrepro plan",
        "smoke_params",  # the tests a new plugin gets
        "test_opt_outs",
        "tests/plugins/test_plugins.py",
        "distrepro[dev]",
        "--debug shows the traceback",
        "tests/engine/test_engine_agreement.py",
    ):
        assert topic in doc, topic


@pytest.mark.distributed  # the generated tests it runs start ranks; about 2 minutes on a quiet machine
@pytest.mark.timeout(1800)
def test_every_command_of_the_guide_runs_against_a_copy_of_the_template(tmp_path: Path) -> None:
    home, work = tmp_path / "home", tmp_path / "work"
    home.mkdir()
    work.mkdir()
    for name in ("methods", "tests", "pyproject.toml"):
        (work / name).symlink_to(REPO / name)
    bin_dir = str(Path(sys.executable).parent)
    env = {
        **os.environ,
        "HOME": str(home),
        "PATH": bin_dir + os.pathsep + os.environ.get("PATH", ""),
        "MLFLOW_TRACKING_URI": f"sqlite:///{tmp_path / 'mlflow.db'}",
        "DISTREPRO_PATH": "",
        "OMP_NUM_THREADS": "1",
    }
    env.pop("DISTREPRO_ROOT", None)
    env.pop("DISTREPRO_PROFILES_DIR", None)
    with distrepro_from_a_zygote(env) as shell_env:
        for command in guide_commands():
            _run_and_check(command, work, shell_env)
    plugin = home / "distrepro-plugins" / "methods" / "my_method"
    assert "method: my_method" in (plugin / "paper.yaml").read_text(encoding="utf-8")
    assert (work / "reports" / "my-paper").is_dir()  # the reproduction's report, in the working folder


def _run_and_check(command: str, work: Path, env: dict[str, str]) -> None:
    """Run one line of the guide in ``bash`` and check what it printed."""
    done = subprocess.run(
        ["bash", "-c", f"set -euo pipefail; {command}"],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        timeout=hang_guard(600),
    )
    assert done.returncode == 0, f"{command}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    if command.startswith("distrepro list"):
        assert re.search(r"^\s+my_method\s", done.stdout, re.M), done.stdout
    if command.startswith("distrepro run"):
        assert re.search(r"seed 0: val_acc [0-9.]+ .* run [0-9a-f]{32}", done.stdout), done.stdout
    if command.startswith("distrepro plan"):
        assert "lr:" in done.stdout and "declares no peak" not in done.stdout, done.stdout
    if "pytest" in command or command.startswith("distrepro test"):
        assert re.search(r"\b[1-9]\d* passed", done.stdout), done.stdout
    if command.startswith("mypy"):
        assert "Success: no issues found" in done.stdout, done.stdout

"""torch's threads in the command's processes wait asleep (distrepro/cli/omp_wait.py): set before torch loads, kept
where the environment already says, nothing in a process that calls ``main()`` itself."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from clirun import python_prints

from distrepro.cli.omp_wait import PASSIVE, VARIABLE

REPO = Path(__file__).resolve().parents[2]

#: the console script with a ``main`` that prints the variable as this process sees it and whether torch was loaded
_CONSOLE = (
    "import os, sys; import distrepro.cli.main; m = sys.modules['distrepro.cli.main']; "
    "m.main = lambda argv=None: print(os.environ.get('OMP_WAIT_POLICY'), 'torch' in sys.modules, flush=True) or 0; "
    "{before}from distrepro.cli.console import console; console()"
)


def _console_prints(environ: dict[str, str], before: str = "") -> str:
    return python_prints(_CONSOLE.format(before=before), cwd=REPO, env=environ)


def _without_variable() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k != VARIABLE}


@pytest.mark.smoke
def test_the_console_script_sets_passive_before_torch_loads() -> None:
    assert _console_prints(_without_variable()) == f"{PASSIVE} False"


@pytest.mark.smoke
def test_a_policy_the_environment_gives_is_kept() -> None:
    assert _console_prints({**_without_variable(), VARIABLE: "ACTIVE"}) == "ACTIVE False"


def test_nothing_is_set_once_torch_is_loaded() -> None:
    """OpenMP read its environment when torch loaded: setting it later would only mislead a child's reader."""
    assert _console_prints(_without_variable(), before="import torch; ") == "None True"


@pytest.mark.smoke
def test_main_called_in_process_sets_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    from distrepro.cli.main import main

    monkeypatch.delenv(VARIABLE, raising=False)
    with pytest.raises(SystemExit):
        main(["--version"])
    assert VARIABLE not in os.environ

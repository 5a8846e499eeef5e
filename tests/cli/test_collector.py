"""The garbage collector of the command's processes (distrepro/cli/collector.py): its youngest generation collected
less often in the console script and the watched child, the rest of its settings and every in-process caller's
collector left alone."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from pathlib import Path

import pytest
from clirun import python_prints

from distrepro.cli.collector import YOUNG_THRESHOLD, collect_less
from distrepro.cli.watch import _CHILD

REPO = Path(__file__).resolve().parents[2]

#: runs a program whose ``main`` prints the collector's thresholds, in place of the command's ``main``
_PRINTING_MAIN = (
    "import gc, sys; import distrepro.cli.main; m = sys.modules['distrepro.cli.main']; "
    "m.main = lambda argv=None: print(*gc.get_threshold(), flush=True) or 0; "
)


@pytest.fixture
def thresholds() -> Iterator[None]:
    """Whatever a test sets, the test process's collector is as it was afterwards."""
    before = gc.get_threshold()
    yield
    gc.set_threshold(*before)


@pytest.mark.smoke
@pytest.mark.usefixtures("thresholds")
def test_the_youngest_generation_waits_longer_and_the_older_ones_keep_theirs() -> None:
    gc.set_threshold(700, 10, 10)
    collect_less()
    assert gc.get_threshold() == (YOUNG_THRESHOLD, 10, 10)
    collect_less()  # twice is once
    assert gc.get_threshold() == (YOUNG_THRESHOLD, 10, 10)


@pytest.mark.smoke
@pytest.mark.usefixtures("thresholds")
@pytest.mark.parametrize("set_before", [(10 * YOUNG_THRESHOLD, 5, 5), (0, 10, 10)])
def test_a_higher_threshold_or_a_collector_switched_off_is_left_as_it_is(set_before: tuple[int, int, int]) -> None:
    gc.set_threshold(*set_before)
    collect_less()
    assert gc.get_threshold() == set_before


def _thresholds_printed(program: str) -> tuple[int, ...]:
    return tuple(int(t) for t in python_prints(_PRINTING_MAIN + program, str(REPO), cwd=REPO).split())


@pytest.mark.smoke
def test_the_console_script_and_the_watched_child_collect_less() -> None:
    """Both processes of a watched ``run`` (the watcher runs the console script; the child, ``_CHILD``)."""
    default = gc.get_threshold()[1:]
    assert _thresholds_printed("from distrepro.cli.console import console; console()") == (
        YOUNG_THRESHOLD,
        *default,
    )
    assert _thresholds_printed(_CHILD) == (YOUNG_THRESHOLD, *default)


@pytest.mark.smoke
@pytest.mark.usefixtures("thresholds")
def test_main_called_in_process_leaves_the_callers_collector_alone() -> None:
    from distrepro.cli.main import main

    gc.set_threshold(700, 10, 10)
    with pytest.raises(SystemExit):
        main(["--version"])
    assert gc.get_threshold() == (700, 10, 10)

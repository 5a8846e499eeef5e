"""``benchmarks/subreaper.py``: the command's status comes back, and an orphan it leaves is waited for (its work is
done, and so counted, before the subreaper returns)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "subreaper.py"


@pytest.mark.smoke
def test_the_status_comes_back_and_an_orphan_is_waited_for(tmp_path: Path) -> None:
    mark = tmp_path / "orphan-done"
    # the shell starts a background job that outlives it, then exits 3 at once
    command = ["bash", "-c", f"(sleep 0.5; touch {mark}) & exit 3"]
    done = subprocess.run([sys.executable, str(SCRIPT), *command], timeout=60, check=False)
    assert done.returncode == 3
    assert mark.exists()  # without the subreaper the shell's exit returns before the orphan touches it


def test_no_command_is_a_usage_line() -> None:
    done = subprocess.run([sys.executable, str(SCRIPT)], capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 2 and done.stderr.startswith("usage:")

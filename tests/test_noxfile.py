"""The nox sessions: one ``reproduce-<paper>`` per paper, installing an optional arm's extra only when asked."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def noxfile():
    spec = importlib.util.spec_from_file_location("distrepro_noxfile", REPO / "noxfile.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.smoke
def test_one_reproduce_session_per_paper(noxfile) -> None:
    assert {"cadp", "chao"} <= set(noxfile._papers())


@pytest.mark.smoke
@pytest.mark.parametrize(
    ("posargs", "extras"),
    [
        ([], "test"),
        (["--seeds", "0"], "test"),
        (["--with", "deepspeed_real"], "test,deepspeed"),
        (["--with=deepspeed_real"], "test,deepspeed"),
        (["--arms", "cadp,deepspeed_real"], "test,deepspeed"),
        (["--arms", "cadp,ddp"], "test"),
    ],
)
def test_reproduce_installs_the_extra_of_requested_optional_arms(noxfile, posargs, extras) -> None:
    assert noxfile._extras(noxfile._papers()["cadp"], posargs) == extras

"""Reading runs holds Python's cyclic garbage collector off, and gives it back as it found it, errors included."""

from __future__ import annotations

import gc

import pytest

from distrepro.claims import runs as runs_mod


@pytest.mark.smoke
def test_load_runs_reads_with_the_collector_off_and_restores_it(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[bool] = []

    def client(uri: str) -> object:
        seen.append(gc.isenabled())
        raise RuntimeError("store gone")

    monkeypatch.setattr(runs_mod, "make_client", client)
    assert gc.isenabled()
    with pytest.raises(RuntimeError, match="store gone"):
        runs_mod.load_runs("toy", tracking_uri="sqlite:///nowhere.db")
    assert seen == [False]
    assert gc.isenabled()


@pytest.mark.smoke
def test_collector_left_off_when_it_was_off() -> None:
    gc.disable()
    try:
        with runs_mod._collector_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()
    finally:
        gc.enable()

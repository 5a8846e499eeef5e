"""The re-timed run and curve tables: written a column at a time, they hold what the cell-by-cell write holds."""

from __future__ import annotations

import copy

import numpy as np
import pandas as pd
import pytest
import yaml
from sensitivity_setups import TINY_PROFILE, _config

from distrepro import metrics as M
from distrepro.config.run_config import validate_config
from distrepro.job.resolve import build_job
from distrepro.sensitivity.retime import RetimedRun, Retimer
from distrepro.sensitivity.space import build_space, latin_hypercube, profile_variables


@pytest.fixture(scope="module")
def retimer(tmp_path_factory: pytest.TempPathFactory) -> Retimer:
    folder = tmp_path_factory.mktemp("retime")
    data = copy.deepcopy(TINY_PROFILE)
    data["name"] = "tiny-retime"
    path = folder / "tiny-retime.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    cfg = validate_config(_config(str(path), "ar_sgd", {"weighting": "equal"}, budget={"epochs": 2}))
    runs = []
    for seed in (0, 1):
        job = build_job(cfg, seed)
        runs.append(RetimedRun(f"r{seed}", "ar", job, (cfg.model_dump_json(exclude={"seeds"}), seed), 1.0, 2))
    return Retimer(runs)


def _tables(with_target: bool = True) -> tuple[pd.DataFrame, pd.DataFrame]:
    """A run table with a run the retimer does not know (left as it was) and curves of three evaluations each."""
    runs = pd.DataFrame(
        {
            "run_id": ["other", "r0", "r1"],
            M.FINAL_EMULATED_S: [9.0, 1.0, 2.0],
            M.FINAL_SAMPLES: [5.0, 6.0, 7.0],
            **({M.TIME_TO_TARGET_S: [0.5, np.nan, 0.25]} if with_target else {}),
        },
        index=[10, 11, 12],
    )
    curves = pd.DataFrame(
        {
            "run_id": ["r1", "r0", "other", "r1", "r0", "r1", "r0"],
            "step": [1, 1, 1, 2, 2, 3, 3],
            M.EMULATED_S: [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7],
        }
    )
    return runs, curves


def _settings(retimer: Retimer) -> list[dict[str, float]]:
    space = build_space(profile_variables([retimer.runs[0].job.profile]), [])
    return [space.central(), *(space.setting(row) for row in latin_hypercube(3, len(space.variables), 5))]


@pytest.mark.parametrize("with_target", [True, False])
def test_the_column_write_holds_the_cell_writes_values_to_the_bit(retimer: Retimer, with_target: bool) -> None:
    runs, curves = _tables(with_target)
    for setting in _settings(retimer):
        got_runs, got_curves = retimer.tables(runs, curves, setting)
        prepared = runs.copy()
        prepared[M.FINAL_USEFUL_FLOPS] = np.nan  # the column tables() adds first, absent from the run table
        want_runs, want_curves = retimer._tables_by_cell(prepared, curves.copy(), setting)
        assert got_curves is not None and want_curves is not None
        pd.testing.assert_frame_equal(got_runs, want_runs, check_exact=True)
        pd.testing.assert_frame_equal(got_curves, want_curves, check_exact=True)
        assert got_runs.at[10, M.FINAL_EMULATED_S] == 9.0 and got_curves.at[2, M.EMULATED_S] == 0.3  # not re-timed
        assert got_runs.at[11, M.FINAL_EMULATED_S] != 1.0  # re-timed
    assert runs.equals(_tables(with_target)[0]) and curves.equals(_tables(with_target)[1])  # the inputs untouched


def test_a_one_ulp_difference_between_the_writes_would_show(retimer: Retimer) -> None:
    runs, curves = _tables()
    got_runs, _ = retimer.tables(runs, curves, {})
    off = got_runs.copy()
    off.at[12, M.FINAL_EMULATED_S] = np.nextafter(off.at[12, M.FINAL_EMULATED_S], np.inf)
    with pytest.raises(AssertionError):
        pd.testing.assert_frame_equal(off, got_runs, check_exact=True)


def test_a_column_that_is_not_float64_is_written_cell_by_cell(
    retimer: Retimer, monkeypatch: pytest.MonkeyPatch
) -> None:
    runs, curves = _tables()
    runs[M.FINAL_SAMPLES] = runs[M.FINAL_SAMPLES].astype(object)
    calls: list[int] = []
    by_cell = Retimer._tables_by_cell

    def spy(self: Retimer, *args: object) -> tuple[pd.DataFrame, pd.DataFrame | None]:
        calls.append(1)
        return by_cell(self, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(Retimer, "_tables_by_cell", spy)
    got_runs, _ = retimer.tables(runs, curves, {})
    assert calls == [1]
    assert got_runs[M.FINAL_SAMPLES].dtype == object
    assert got_runs.at[11, M.FINAL_SAMPLES] == float(retimer.timing(retimer.runs[0], {}).samples)


def test_the_float_path_is_taken_for_float_tables(retimer: Retimer, monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: object) -> None:
        raise AssertionError("cell by cell")

    monkeypatch.setattr(Retimer, "_tables_by_cell", refuse)
    got_runs, got_curves = retimer.tables(*_tables(), {})
    assert got_curves is not None and got_curves[M.EMULATED_S].dtype == "float64"
    assert got_runs.at[12, M.FINAL_EMULATED_S] == retimer.timing(retimer.runs[1], {}).emulated_s


def _fresh(retimer: Retimer) -> Retimer:
    """A retimer of the fixture's runs with nothing simulated (its own runs: a retimer sets their probers)."""
    runs = [RetimedRun(r.run_id, r.arm, r.job, r.key, r.logged_emulated_s, r.step_to_target) for r in retimer.runs]
    return Retimer(runs)


@pytest.mark.smoke
def test_settings_prefetch_leaves_to_timing_replay_its_jobs_to_the_same_bits(retimer: Retimer) -> None:
    """Four lanes (two runs at two settings) are too few to replay together: prefetch keeps the jobs it built, and
    timing replays those very jobs, to the bit of a retimer that builds them afresh."""
    settings = _settings(retimer)[:2]
    kept, fresh = _fresh(retimer), _fresh(retimer)
    kept.prefetch(settings)
    assert kept.simulations == 0 and len(kept._built) == 4
    jobs = dict(kept._built)
    replayed = []
    for run in kept.runs:
        for setting in settings:
            memo, job = kept._at(run, setting)
            assert job is not None
            replayed.append(job is jobs[memo])
            kept._built[memo] = job  # put back: timing() below takes it again
    assert all(replayed)
    for setting in settings:
        a, b = kept.timings(setting), fresh.timings(setting)
        assert {k: (t.emulated_s, t.step_end_s) for k, t in a.items()} == {
            k: (t.emulated_s, t.step_end_s) for k, t in b.items()
        }
    assert not kept._built and kept.simulations == fresh.simulations == 4

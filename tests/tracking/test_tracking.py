"""MLflow logging: run tree, exact metric read-back, batching, failure handling.

Each test gets its own sqlite file, copied from an already-migrated template (migrating takes
~3 s, much more on a busy disk; opening a copy ~0.05 s), and runs with the cwd in a scratch
folder so stray writes are caught.
"""

from __future__ import annotations

import dataclasses
import math
import os
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from distrepro.tracking.campaign_run import Campaign
from distrepro.tracking.mlflow_client import (
    TRUNCATION_MARKER,
    RunLogger,
    TrackingError,
    ensure_experiment,
    experiment_name,
    flatten,
    flatten_params,
    make_client,
    resolve_tracking_uri,
)

EXP = "distrepro/test-paper"


@pytest.fixture
def migrated_db(migrated_mlflow_db: Path) -> Path:
    """The session's pre-migrated template store (tests/conftest.py)."""
    return migrated_mlflow_db


@pytest.fixture
def uri(migrated_db: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    db = tmp_path / "mlflow.db"
    shutil.copyfile(migrated_db, db)
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path.parent))
    return f"sqlite:///{db}"


def _campaign(uri: str, tmp_path: Path, **kw) -> Campaign:
    kw.setdefault("tags", {"paper.id": "test-paper"})
    return Campaign(EXP, "campaign-1", tracking_uri=uri, repo=tmp_path, **kw)


def _history(client: Any, run_id: str, key: str) -> list[tuple[int, float]]:
    return sorted((m.step, m.value) for m in client.get_metric_history(run_id, key))


@pytest.mark.smoke
def test_parent_child_tree(uri: str, tmp_path: Path) -> None:
    with _campaign(uri, tmp_path, params={"seeds": [0, 1]}) as camp:
        assert camp.client.get_run(camp.run_id).info.status == "RUNNING"
        with camp.child("dpsgd/s0", params={"lr": 0.1}, tags={"method": "dpsgd", "seed": 0}) as run:
            run.log_metrics({"loss": 1.0}, step=0)
        child_id = run.run_id
    client = make_client(uri)
    parent, child = client.get_run(camp.run_id), client.get_run(child_id)
    assert child.data.tags["mlflow.parentRunId"] == camp.run_id
    assert "mlflow.parentRunId" not in parent.data.tags
    assert (parent.info.status, child.info.status) == ("FINISHED", "FINISHED")
    assert (parent.info.run_name, child.info.run_name) == ("campaign-1", "dpsgd/s0")
    # and the lock's first generation (tracking.campaign_lock), held while the campaign was open
    assert parent.data.params.pop("distrepro.lock.1").startswith('{"host": ')
    assert parent.data.params == {"seeds.0": "0", "seeds.1": "1"}
    assert child.data.params == {"lr": "0.1"}
    # children inherit campaign tags, so cell-level search filters work
    assert child.data.tags["paper.id"] == "test-paper" and child.data.tags["seed"] == "0"
    found = client.search_runs([camp.experiment_id])
    assert {r.info.run_id for r in found} == {camp.run_id, child_id}
    only_child = client.search_runs([camp.experiment_id], filter_string="tags.method = 'dpsgd'")
    assert [r.info.run_id for r in only_child] == [child_id]
    assert client.get_experiment(camp.experiment_id).name == EXP == experiment_name("test-paper")


@pytest.mark.smoke
def test_buffered_metrics_read_back_exactly_in_chunks(uri: str, tmp_path: Path) -> None:
    with _campaign(uri, tmp_path) as camp:
        run = camp.child("cell")
        calls: list[int] = []
        real = camp.client.log_batch

        def counting(run_id, metrics=(), params=(), tags=(), **kw):
            calls.append(len(metrics))
            return real(run_id, metrics=metrics, params=params, tags=tags, **kw)

        camp.client.log_batch = counting  # type: ignore[method-assign]
        for i in range(2500):
            run.log_metrics({"loss": 1.0 / (i + 1)}, step=i)
        assert run.pending == 2500 and calls == []  # nothing written yet
        assert camp.client.get_metric_history(run.run_id, "loss") == []
        run.finish()
        assert calls == [1000, 1000, 500]
    got = _history(make_client(uri), run.run_id, "loss")
    assert got == [(i, 1.0 / (i + 1)) for i in range(2500)]  # exact doubles, every step


@pytest.mark.smoke
def test_auto_flush_on_size_and_on_timer(uri: str, tmp_path: Path) -> None:
    with _campaign(uri, tmp_path) as camp:
        by_size = RunLogger(camp.client, camp.child("a").run_id, flush_every_s=None, max_buffer=100)
        for i in range(150):
            by_size.log_metrics({"x": float(i)}, step=i)
        assert by_size.pending == 50
        assert len(camp.client.get_metric_history(by_size.run_id, "x")) == 100

        by_time = RunLogger(camp.client, camp.child("b").run_id, flush_every_s=0.05)
        by_time.log_metrics({"x": 1.0}, step=0)
        assert by_time.pending == 1
        time.sleep(0.06)
        by_time.log_metrics({"x": 2.0}, step=1)
        assert by_time.pending == 0
        assert _history(camp.client, by_time.run_id, "x") == [(0, 1.0), (1, 2.0)]


@pytest.mark.smoke
def test_emulated_series_use_millisecond_steps(uri: str, tmp_path: Path) -> None:
    with _campaign(uri, tmp_path) as camp, camp.child("cell") as run:
        for t, acc in [(0.0, 0.1), (1.5, 0.4), (2.0004, 0.5), (3.0006, 0.6), (86400.0, 0.9)]:
            run.log_emulated({"val_accuracy": acc}, emulated_s=t)
        run.log_metrics({"val_accuracy": 0.9}, step=7)
        with pytest.raises(TrackingError, match="emulated time"):
            run.log_emulated({"x": 1.0}, emulated_s=-1.0)
        with pytest.raises(TrackingError, match="64-bit"):  # past MLflow's int64 steps: one line, not SQLite's
            run.log_emulated({"x": 1.0}, emulated_s=1e17)
    client = make_client(uri)
    assert _history(client, run.run_id, "emu_ms/val_accuracy") == [
        (0, 0.1),
        (1500, 0.4),
        (2000, 0.5),
        (3001, 0.6),
        (86_400_000, 0.9),
    ]
    assert _history(client, run.run_id, "val_accuracy") == [(7, 0.9)]


@dataclasses.dataclass
class _Opt:
    name: str = "sgd"
    lr: float = 0.05


@pytest.mark.smoke
def test_flatten_params() -> None:
    nested = {
        "model": {"name": "resnet20", "width": 16},
        "devices": [{"count": 2}, {"count": 1}],
        "opt": _Opt(),
        "empty": {},
        "none": None,
        "flag": True,
    }
    assert flatten_params(nested) == {
        "model.name": "resnet20",
        "model.width": "16",
        "devices.0.count": "2",
        "devices.1.count": "1",
        "opt.name": "sgd",
        "opt.lr": "0.05",
        "empty": "{}",
        "none": "None",
        "flag": "True",
    }
    assert flatten_params({"a": {"b": 1}}, prefix="cfg") == {"cfg.a.b": "1"}
    assert flatten({"a": [1.5]}) == {"a.0": 1.5}  # flatten keeps leaf types
    with pytest.raises(TypeError):
        flatten(3)

    import pydantic

    class Model(pydantic.BaseModel):
        depth: int = 3
        sizes: list[int] = [4, 5]

    assert flatten_params({"m": Model()}) == {"m.depth": "3", "m.sizes.0": "4", "m.sizes.1": "5"}


@pytest.mark.smoke
def test_params_and_tags_are_stringified_and_truncated(uri: str, tmp_path: Path) -> None:
    with _campaign(uri, tmp_path) as camp, camp.child("cell") as run:
        many = {f"p{i:03d}": i for i in range(250)}  # > 100 per batch
        run.log_params({"cfg": {"long": "x" * 7000, "list": [1, 2]}, **many})
        run.set_tags({"note": "y" * 9000, "n": 3})
        with pytest.raises(ValueError, match="invalid param name"):
            run.log_params({"bad[key]": 1})
    data = make_client(uri).get_run(run.run_id).data
    long = data.params["cfg.long"]
    assert len(long) == 6000 and long.endswith(TRUNCATION_MARKER) and long.startswith("x" * 5000)
    assert data.params["cfg.list.1"] == "2" and data.params["p249"] == "249"
    assert len(data.tags["note"]) == 8000 and data.tags["note"].endswith(TRUNCATION_MARKER)
    assert data.tags["n"] == "3"


@pytest.mark.smoke
def test_failing_child_is_failed_and_keeps_its_metrics(uri: str, tmp_path: Path) -> None:
    with _campaign(uri, tmp_path) as camp:
        with pytest.raises(RuntimeError, match="diverged"), camp.child("cell") as run:
            for i in range(10):
                run.log_metrics({"loss": float(i)}, step=i)
            assert run.pending == 10  # still buffered when the error hits
            raise RuntimeError("diverged")
        assert run.status == "FAILED"
        other = camp.child("next")  # the campaign goes on
        other.finish()
    client = make_client(uri)
    assert client.get_run(run.run_id).info.status == "FAILED"
    assert _history(client, run.run_id, "loss") == [(i, float(i)) for i in range(10)]
    assert client.get_run(camp.run_id).info.status == "FINISHED"
    with pytest.raises(RuntimeError, match="already finished"):
        run.log_metrics({"loss": 0.0}, step=99)


@pytest.mark.smoke
def test_escaping_exception_fails_campaign_and_open_children(uri: str, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="boom"), _campaign(uri, tmp_path) as camp:
        run = camp.child("cell")
        run.log_metrics({"loss": 0.5}, step=3)
        raise ValueError("boom")
    client = make_client(uri)
    assert client.get_run(camp.run_id).info.status == "FAILED"
    assert client.get_run(run.run_id).info.status == "FAILED"
    assert _history(client, run.run_id, "loss") == [(3, 0.5)]


@pytest.mark.smoke
def test_open_child_at_normal_exit_and_ctrl_c(uri: str, tmp_path: Path) -> None:
    with _campaign(uri, tmp_path) as camp:
        forgotten = camp.child("forgotten")
    client = make_client(uri)
    assert client.get_run(camp.run_id).info.status == "FINISHED"
    assert client.get_run(forgotten.run_id).info.status == "FAILED"
    with pytest.raises(RuntimeError, match="campaign is over"):
        camp.child("late")

    with pytest.raises(KeyboardInterrupt), _campaign(uri, tmp_path) as camp2:
        run = camp2.child("cell")
        raise KeyboardInterrupt
    assert client.get_run(camp2.run_id).info.status == "KILLED"
    assert client.get_run(run.run_id).info.status == "KILLED"


def _git(repo: Path, *args: str) -> str:
    cfg = ["-c", "user.name=t", "-c", "user.email=t@example.org", "-c", "commit.gpgsign=false"]
    env = {**os.environ, "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}
    done = subprocess.run(["git", *cfg, "-C", str(repo), *args], check=True, capture_output=True, text=True, env=env)
    return done.stdout.strip()


@pytest.mark.smoke
def test_provenance_tags(uri: str, tmp_path: Path) -> None:
    repo = tmp_path / "src"
    repo.mkdir()
    _git(repo, "init", "-q", "-b", "main")
    (repo / "f.py").write_text("x = 1\n")
    _git(repo, "add", "f.py")
    _git(repo, "commit", "-q", "-m", "c")
    head = _git(repo, "rev-parse", "HEAD")
    with Campaign(EXP, "c", tags={"paper.id": "p"}, tracking_uri=uri, repo=repo) as camp:
        cell = camp.child("cell")
        cell.finish()
    client = make_client(uri)
    for run_id in (camp.run_id, cell.run_id):
        tags = client.get_run(run_id).data.tags
        assert tags["git.commit"] == tags["mlflow.source.git.commit"] == head
        assert tags["git.dirty"] == "false" and tags["git.branch"] == "main"
        assert tags["versions.mlflow"] == "3.17.2"
        assert tags["host.cuda_available"] in ("true", "false")
        assert {"versions.python", "versions.torch", "host.hostname", "host.cpu_count"} <= tags.keys()
    # outside git: recorded as unknown, and no misleading mlflow.source tag
    with Campaign(EXP, "c2", tags={}, tracking_uri=uri, repo=tmp_path / "cwd") as camp2:
        pass
    tags2 = client.get_run(camp2.run_id).data.tags
    assert tags2["git.commit"] == "unknown" and "mlflow.source.git.commit" not in tags2
    # default repo is the checkout holding distrepro/
    assert Campaign(EXP, "x", tags={}).repo == Path(__file__).resolve().parents[2]


@pytest.mark.smoke
def test_1000_points_go_out_in_one_batch_never_one_by_one(uri: str, tmp_path: Path) -> None:
    """Unbatched, 1000 ``log_metric`` calls cost 7-10 s on sqlite, batched about 0.15 s (measured: the runlog
    module's docstring); what decides that is the number of store calls, which this counts (a time bound would be
    the machine's load as much as the code's)."""
    with _campaign(uri, tmp_path) as camp, camp.child("cell") as run:
        calls: list[str] = []
        for name in ("log_batch", "log_metric"):
            real = getattr(camp.client, name)
            setattr(camp.client, name, lambda *a, _real=real, _name=name, **kw: calls.append(_name) or _real(*a, **kw))
        for i in range(1000):
            run.log_metrics({"loss": float(i)}, step=i)
        run.flush()
        assert calls == ["log_batch"]
    assert len(make_client(uri).get_metric_history(run.run_id, "loss")) == 1000


@pytest.mark.smoke
def test_non_finite_values_and_bad_input(uri: str, tmp_path: Path) -> None:
    import numpy as np

    with _campaign(uri, tmp_path) as camp, camp.child("cell") as run:
        run.log_metrics({"nan": float("nan"), "inf": math.inf, "np": np.float32(0.25)}, step=1)
        run.log_summary({"final_acc": 0.75})
        with pytest.raises(ValueError, match="not a number"):
            run.log_metrics({"x": "high"}, step=0)  # type: ignore[dict-item]
        with pytest.raises(ValueError, match="invalid metric name"):
            run.log_metrics({"ok": 1.0, "../x": 1.0}, step=0)
        assert run.pending == 4  # nan, inf, np, final_acc: the rejected dict added nothing
    client = make_client(uri)
    assert math.isnan(client.get_metric_history(run.run_id, "nan")[0].value)
    # MLflow's sqlite store has no infinity: it stores the largest double instead
    assert _history(client, run.run_id, "inf") == [(1, 1.7976931348623157e308)]
    assert _history(client, run.run_id, "np") == [(1, 0.25)]
    assert _history(client, run.run_id, "final_acc") == [(0, 0.75)]


@pytest.mark.smoke
def test_flush_error_keeps_points_and_finish_marks_failed(uri: str, tmp_path: Path) -> None:
    with _campaign(uri, tmp_path) as camp:
        run = camp.child("cell")
        run.log_metrics({"x": 1.0}, step=0)
        real = camp.client.log_batch
        camp.client.log_batch = lambda *a, **k: (_ for _ in ()).throw(OSError("disk full"))  # type: ignore[method-assign]
        with pytest.raises(OSError):
            run.flush()
        assert run.pending == 1
        camp.client.log_batch = real  # type: ignore[method-assign]
        run.flush()
        assert _history(camp.client, run.run_id, "x") == [(0, 1.0)]

        broken = camp.child("broken")
        broken.log_metrics({"x": 1.0}, step=0)
        camp.client.log_batch = lambda *a, **k: (_ for _ in ()).throw(OSError("disk full"))  # type: ignore[method-assign]
        with pytest.raises(OSError):
            broken.finish("FINISHED")
        camp.client.log_batch = real  # type: ignore[method-assign]
        run.finish()
        broken.finish()  # idempotent: already closed
    assert make_client(uri).get_run(broken.run_id).info.status == "FAILED"


@pytest.mark.smoke
def test_artifacts_go_beside_the_db(uri: str, tmp_path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    src = tmp_path / "profile.yaml"
    src.write_text("name: tiny\n")
    with _campaign(uri, tmp_path) as camp:
        camp.log_text("hello", "notes/readme.txt")
        camp.log_artifact(src)
        with camp.child("cell") as run:
            run.log_dict({"verdict": "pass"}, "claims_verdict.json")
            run.log_dict({"a": [1, 2]}, "config.resolved.yaml")
            fig, ax = plt.subplots()
            ax.plot([0, 1], [0, 1])
            run.log_figure(fig, "plots/curve.png")
            plt.close(fig)
    root = tmp_path / "mlartifacts" / "distrepro_test-paper"
    assert (root / camp.run_id / "artifacts" / "notes" / "readme.txt").read_text() == "hello"
    assert (root / camp.run_id / "artifacts" / "profile.yaml").exists()
    arts = root / run.run_id / "artifacts"
    assert '"verdict": "pass"' in (arts / "claims_verdict.json").read_text()
    assert "- 1" in (arts / "config.resolved.yaml").read_text()
    assert (arts / "plots" / "curve.png").read_bytes()[:4] == b"\x89PNG"
    assert list((tmp_path / "cwd").iterdir()) == []  # nothing leaked into the cwd


@pytest.mark.smoke
def test_experiment_reuse_race_and_deleted(uri: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    client = make_client(uri)
    first = ensure_experiment(client, "distrepro/race")
    assert ensure_experiment(client, "distrepro/race") == first
    # the other process created it between our lookup and our create
    real = client.get_experiment_by_name
    answers = iter([None])
    monkeypatch.setattr(client, "get_experiment_by_name", lambda name: next(answers, None) or real(name))
    assert ensure_experiment(client, "distrepro/race") == first
    monkeypatch.undo()
    client.delete_experiment(first)
    with pytest.raises(TrackingError, match="deleted"):
        ensure_experiment(client, "distrepro/race")


@pytest.mark.smoke
def test_two_campaigns_in_one_process_do_not_interfere(migrated_db: Path, uri: str, tmp_path: Path) -> None:
    other_db = tmp_path / "other.db"
    shutil.copyfile(migrated_db, other_db)
    other_uri = f"sqlite:///{other_db}"
    with _campaign(uri, tmp_path) as a, _campaign(other_uri, tmp_path) as b:
        ra, rb = a.child("a"), b.child("b")
        ra.log_metrics({"m": 1.0}, step=0)
        rb.log_metrics({"m": 2.0}, step=0)
        ra.finish()
        rb.finish()
    assert [r.info.run_id for r in make_client(uri).search_runs([a.experiment_id])].count(ra.run_id) == 1
    assert make_client(other_uri).search_runs([b.experiment_id], filter_string="tags.`mlflow.runName` = 'a'") == []
    assert _history(make_client(other_uri), rb.run_id, "m") == [(0, 2.0)]


@pytest.mark.smoke
def test_resolve_tracking_uri(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    assert resolve_tracking_uri() == f"sqlite:///{tmp_path.resolve()}/mlflow.db"
    assert resolve_tracking_uri().startswith("sqlite:////")  # absolute path: four slashes
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "http://127.0.0.1:5055")
    assert resolve_tracking_uri() == "http://127.0.0.1:5055"
    assert os.environ["MLFLOW_DISABLE_TELEMETRY"] == "true"

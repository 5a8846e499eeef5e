"""One writer per campaign: the lock on the campaign's run, its compare-and-set, refusal and takeover.

The units run against a fresh sqlite store with a simulated holder (a lock param and heartbeat written as another
process would); the last test runs two real ``distrepro`` processes on one campaign.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from distrepro.tracking import campaign_lock
from distrepro.tracking.campaign_lock import (
    LOCK_TAG,
    STALE_S,
    CampaignLock,
    CampaignLocked,
    read_holder,
    stale_reason,
)
from distrepro.tracking.campaign_run import Campaign
from distrepro.tracking.mlflow_client import make_client

REPO = Path(__file__).resolve().parents[2]


def _run(uri: str) -> str:
    client = make_client(uri)
    exp = client.create_experiment("locks")
    return str(client.create_run(exp).info.run_id)


def _plant(uri: str, run_id: str, generation: int, host: str, pid: int, heartbeat: float) -> None:
    """Generation ``generation`` held by ``pid`` on ``host``, last heard of at ``heartbeat``: another process's."""
    client = make_client(uri)
    owner = {"host": host, "pid": pid, "started": heartbeat - 1}
    client.log_param(run_id, f"distrepro.lock.{generation}", json.dumps(owner))
    client.set_tag(run_id, LOCK_TAG, json.dumps({"generation": generation, "heartbeat": heartbeat, "released": False}))


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


@pytest.mark.smoke
def test_the_newest_generation_and_its_heartbeat_are_read_back() -> None:
    params = {
        "distrepro.lock.1": json.dumps({"host": "a", "pid": 1, "started": 10.0}),
        "distrepro.lock.2": json.dumps({"host": "b", "pid": 2, "started": 20.0}),
        "lr": "0.1",
    }
    holder = read_holder(params, {LOCK_TAG: json.dumps({"generation": 2, "heartbeat": 25.0, "released": False})})
    assert holder is not None and (holder.generation, holder.host, holder.pid, holder.heartbeat) == (2, "b", 2, 25.0)
    # a heartbeat of an older generation says nothing about the newest: its start is its last sign of life
    old_beat = read_holder(params, {LOCK_TAG: json.dumps({"generation": 1, "heartbeat": 99.0, "released": True})})
    assert old_beat is not None and (old_beat.heartbeat, old_beat.released) == (20.0, False)
    assert read_holder({"lr": "0.1"}, {}) is None


@pytest.mark.smoke
def test_stale_means_an_old_heartbeat_or_a_gone_process_on_this_host() -> None:
    holder = read_holder(
        {"distrepro.lock.1": json.dumps({"host": "elsewhere", "pid": 1, "started": 1000.0})},
        {LOCK_TAG: json.dumps({"generation": 1, "heartbeat": 1000.0})},
    )
    assert holder is not None
    assert stale_reason(holder, now=1000.0 + STALE_S - 1) is None  # another host's pid is not ours to probe
    assert "over the 300 s limit" in (stale_reason(holder, now=1000.0 + STALE_S + 1) or "")
    here = holder.__class__(1, socket.gethostname(), _dead_pid(), 1000.0, time.time(), False)
    assert "is gone" in (stale_reason(here) or "")


def test_a_live_holder_refuses_a_second_writer_until_it_releases(mlflow_uri: str) -> None:
    run_id = _run(mlflow_uri)
    first = CampaignLock(make_client(mlflow_uri), run_id)
    first.acquire()
    try:
        with pytest.raises(CampaignLocked) as refused:
            CampaignLock(make_client(mlflow_uri), run_id).acquire()
        line = str(refused.value)
        assert run_id in line and f"pid {os.getpid()}" in line and socket.gethostname() in line, line
        assert "would train its seeds twice" in line and "--resume" in line
    finally:
        first.release()
    second = CampaignLock(make_client(mlflow_uri), run_id)
    second.acquire()  # released: the next generation, without a takeover line
    assert second.generation == 2
    second.release()


def test_a_stale_lock_is_taken_over_with_a_line(mlflow_uri: str, capsys: pytest.CaptureFixture[str]) -> None:
    run_id = _run(mlflow_uri)
    _plant(mlflow_uri, run_id, 1, "another-host", 4242, time.time() - STALE_S - 60)
    lock = CampaignLock(make_client(mlflow_uri), run_id)
    lock.acquire()
    assert lock.generation == 2
    err = capsys.readouterr().err
    assert f"campaign run {run_id}: taking over its lock from pid 4242 on host another-host" in err
    assert "over the 300 s limit" in err
    lock.release()

    _plant(mlflow_uri, run_id, 3, socket.gethostname(), _dead_pid(), time.time())  # fresh, but its process is gone
    again = CampaignLock(make_client(mlflow_uri), run_id)
    again.acquire()
    assert again.generation == 4 and "on this host is gone" in capsys.readouterr().err
    again.release()


class _Snapshot:
    """A client whose first ``get_run`` answers with what the run held before: a contender that read the store just
    before another process took the lock."""

    def __init__(self, client: Any, before: Any) -> None:
        self.client, self.before = client, before

    def __getattr__(self, name: str) -> Any:
        if name == "get_run" and self.before is not None:
            before, self.before = self.before, None
            return lambda run_id: before
        return getattr(self.client, name)


def test_of_two_contenders_for_a_stale_lock_one_wins_the_other_is_refused(mlflow_uri: str) -> None:
    """Both read the stale generation 1; both log generation 2. MLflow refuses to change a logged param, so exactly
    one insert commits: the loser reads again and finds a live holder."""
    run_id = _run(mlflow_uri)
    _plant(mlflow_uri, run_id, 1, "another-host", 4242, time.time() - STALE_S - 60)
    stale_view = make_client(mlflow_uri).get_run(run_id)
    winner = CampaignLock(make_client(mlflow_uri), run_id)
    winner.acquire()
    try:
        loser = CampaignLock(_Snapshot(make_client(mlflow_uri), stale_view), run_id)
        with pytest.raises(CampaignLocked):
            loser.acquire()
        assert loser.generation is None and winner.generation == 2
        params = make_client(mlflow_uri).get_run(run_id).data.params
        assert sorted(k for k in params if k.startswith("distrepro.lock.")) == ["distrepro.lock.1", "distrepro.lock.2"]
    finally:
        winner.release()


def test_the_heartbeat_is_refreshed_and_the_release_marked(mlflow_uri: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(campaign_lock, "HEARTBEAT_S", 0.05)
    run_id = _run(mlflow_uri)
    lock = CampaignLock(make_client(mlflow_uri), run_id)
    lock.acquire()
    client = make_client(mlflow_uri)
    first = json.loads(client.get_run(run_id).data.tags[LOCK_TAG])["heartbeat"]
    deadline = time.monotonic() + 60
    while json.loads(client.get_run(run_id).data.tags[LOCK_TAG])["heartbeat"] == first:
        assert time.monotonic() < deadline, "the heartbeat was never refreshed"
        time.sleep(0.05)
    lock.release()
    beat = json.loads(client.get_run(run_id).data.tags[LOCK_TAG])
    assert beat["released"] is True and beat["generation"] == 1


def test_a_locked_campaign_is_refused_before_its_run_is_touched(mlflow_uri: str) -> None:
    with Campaign("distrepro/adhoc", "c", {"distrepro.campaign": "c"}, tracking_uri=mlflow_uri) as first:
        run_id = first.run_id
        assert run_id is not None
        first.parent.finish("FAILED")  # as a crashed session left it, its process (this one) still alive
        with pytest.raises(CampaignLocked):
            Campaign("distrepro/adhoc", "c", {}, tracking_uri=mlflow_uri, resume_run_id=run_id).__enter__()
        assert make_client(mlflow_uri).get_run(run_id).info.status == "FAILED"  # not reopened
    again = Campaign("distrepro/adhoc", "c", {}, tracking_uri=mlflow_uri, resume_run_id=run_id)
    with again:  # the first one's exit released it
        assert again.lock is not None and again.lock.generation == 2


def test_a_second_resume_of_a_live_campaign_is_refused_and_nothing_trains_twice(
    tmp_path: Path, migrated_mlflow_db: Path
) -> None:
    """Two real processes: the first trains seed 0 and waits inside its first step; a ``--resume`` of its campaign
    meanwhile used to declare the live seed run dead and train it again. It is refused (exit 2, one line naming the
    campaign and its holder); the first then finishes, and the campaign has one run of seed 0."""
    import shutil

    import cli_zygote
    import yaml
    from clirun import TINY, cli_env
    from hang_guard import hang_guard

    root, flag = tmp_path / "root", tmp_path / "go-on"
    text = (REPO / "methods" / "ar_sgd" / "method.py").read_text(encoding="utf-8")
    head = "    def train_step(self, ctx: api.WorkerContext, batch: api.Batch) -> None:\n"
    wait = (
        head
        + f"        import os, time\n        while not os.path.exists({str(flag)!r}):\n            time.sleep(0.1)\n"
    )
    (root / "methods" / "waiting").mkdir(parents=True)
    (root / "methods" / "waiting" / "method.py").write_text(
        text.replace(head, wait).replace('name = "ar_sgd"', 'name = "waiting"'), encoding="utf-8"
    )
    config = tmp_path / "waits.yaml"
    config.write_text(yaml.safe_dump({**TINY, "name": "waits", "method": "waiting", "seeds": [0]}), encoding="utf-8")
    db = tmp_path / "mlflow.db"
    shutil.copyfile(migrated_mlflow_db, db)
    uri = f"sqlite:///{db}"
    argv = ["run", str(config), "--no-progress", "--root", str(root)]
    env = {**cli_env(uri), "DISTREPRO_JOBS": "1"}
    pipes = {"stdout": subprocess.PIPE, "stderr": subprocess.PIPE}
    first = cli_zygote.popen(argv, tmp_path, env, **pipes)  # each a process of its own (cli_zygote says why)
    try:
        assert first.stdout is not None
        started = first.stdout.readline()
        campaign = started.split()[2]
        assert started.startswith("campaign run ") and len(campaign) == 32, started
        second = cli_zygote.popen([*argv, "--resume", campaign], tmp_path, env, **pipes)
        _, second_err = second.communicate(timeout=hang_guard(240))
        assert second_err is not None
        errors = [line for line in second_err.splitlines() if line.startswith("distrepro: error: ")]
        assert second.returncode == 2 and len(errors) == 1, second_err
        assert f"campaign run {campaign} is being written by pid " in errors[0], errors
        assert f"on host {socket.gethostname()}" in errors[0] and "train its seeds twice" in errors[0], errors
        flag.touch()
        _, err = first.communicate(timeout=hang_guard(240))
    finally:
        flag.touch()
        if first.poll() is None:
            first.kill()
    assert first.returncode == 0, err
    client = make_client(uri)
    runs = client.search_runs([client.get_experiment_by_name("distrepro/adhoc").experiment_id])
    cells = [r for r in runs if "mlflow.parentRunId" in r.data.tags]
    assert len(runs) == 2 and len(cells) == 1, [(r.info.run_name, r.info.status) for r in runs]
    assert {r.info.status for r in runs} == {"FINISHED"}

"""``distrepro ui``: a store that is not there, a port in use and a bad port are one line each before any server
starts; a served UI prints the address of each paper's runs table and ends with Ctrl-C, exit 0."""

from __future__ import annotations

import re
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from cellruns import sigint_as_at_a_terminal
from clirun import free_port
from hang_guard import hang_guard

from distrepro.cli import main
from distrepro.tracking.mlflow_client import ensure_experiment, make_client
from distrepro.tracking.ui_server import base_url
from distrepro.tracking.ui_view import EXPLORATORY_TAG


@pytest.mark.smoke
def test_a_store_that_is_not_there_is_refused_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    missing = f"sqlite:///{tmp_path / 'nowhere.db'}"
    assert main(["ui", "--store", missing]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith(f"distrepro: error: --store {missing}: no such file")
    assert not (tmp_path / "nowhere.db").exists()  # MLflow would have made an empty one


@pytest.mark.smoke
def test_a_port_in_use_is_refused_before_the_server_starts(mlflow_uri: str, capsys: pytest.CaptureFixture[str]) -> None:
    make_client(mlflow_uri)  # the store exists
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        assert main(["ui", "--store", mlflow_uri, "--port", str(port)]) == 2
    err = capsys.readouterr().err
    assert f"distrepro: error: --port {port}: cannot listen on 127.0.0.1:{port}" in err
    assert "starting the MLflow UI" not in err


@pytest.mark.smoke
@pytest.mark.parametrize("port", ["0", "70000", "http"])
def test_a_bad_port_is_an_argument_error(port: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["ui", "--port", port])
    assert exit_.value.code == 2 and "is not a port (1 to 65535)" in capsys.readouterr().err


@pytest.mark.smoke
def test_every_interface_is_opened_through_this_machine() -> None:
    assert base_url("0.0.0.0", 5000) == "http://127.0.0.1:5000"
    assert base_url("::", 5001) == "http://[::1]:5001"
    assert base_url("myhost", 80) == "http://myhost:80"


@pytest.mark.server
def test_it_prints_each_view_and_stops_on_ctrl_c(mlflow_uri: str, tmp_path: Path) -> None:
    client = make_client(mlflow_uri)
    exp = ensure_experiment(client, "distrepro/uicli")
    client.create_run(exp, run_name="pilot", tags={EXPLORATORY_TAG: "true"})
    ensure_experiment(client, "distrepro/other")
    client.create_experiment("not distrepro's")
    port = free_port()
    command = [sys.executable, "-m", "distrepro.cli", "ui", "--store", mlflow_uri, "--port", str(port)]
    proc = subprocess.Popen(  # Ctrl-C as at a terminal: a process that inherits an ignored SIGINT never sees it
        command,
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=sigint_as_at_a_terminal,
    )
    try:
        lines: list[str] = []
        deadline = time.monotonic() + hang_guard(120)
        while not any("Assistant panel" in line for line in lines) and time.monotonic() < deadline:
            line = proc.stdout.readline()  # type: ignore[union-attr]
            if not line:
                break
            lines.append(line)
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=hang_guard(10)) as reply:
            assert reply.status == 200
    finally:
        proc.send_signal(signal.SIGINT)
        rc = proc.wait(timeout=hang_guard(60))
    out = "".join(lines) + proc.stdout.read()  # type: ignore[union-attr]
    base = f"http://127.0.0.1:{port}"
    assert out.startswith(f"MLflow UI: {base} (store {mlflow_uri}); Ctrl-C stops it\n")
    shown = re.findall(r"^  (.+?): (http://\S+)$", out, flags=re.M)
    assert [label for label, _ in shown] == ["distrepro/other", "distrepro/uicli", "distrepro/uicli, exploratory runs"]
    assert shown[1][1] == f"{base}/#/experiments/{exp}/runs?viewStateShareKey=distrepro&workflowType=machine_learning"
    assert "viewStateShareKey=distrepro-exploratory" in shown[2][1]
    assert rc == 0 and out.rstrip().endswith("MLflow UI stopped")
    assert "starting the MLflow UI on" in proc.stderr.read()  # type: ignore[union-attr]

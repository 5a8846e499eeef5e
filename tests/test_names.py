"""Names that become paths or experiments (:mod:`distrepro.names`): every writer refuses a hostile one, and no
file lands outside the folder it was meant for."""

from __future__ import annotations

from pathlib import Path

import pytest

from distrepro.claims.papers import find_paper
from distrepro.config.run_config import validate_config
from distrepro.errors import ConfigError
from distrepro.names import check_name, inside, name_problem
from distrepro.report.build import build_report
from distrepro.tracking.mlflow_client import experiment_name

HOSTILE = ["../../../../escaped", "..", ".", "a/b", "/etc", "a\\b", "a b", "x\x00y", "", "-rf", "é", "a" * 129, "a\n"]
FINE = ["cadp", "my-paper", "decentdp-accum_jitter", "r152_qsr2", "v1.2+local", "a" * 128]


@pytest.mark.parametrize("name", HOSTILE)
def test_a_hostile_name_is_refused_by_every_entry_point(name: str, tmp_path: Path) -> None:
    assert name_problem(name) is not None
    with pytest.raises(ConfigError, match="not a valid name"):
        check_name(name, "PAPER", None)
    if name:  # no paper at all is the adhoc experiment
        with pytest.raises(ConfigError, match="not a valid name"):
            experiment_name(name)
    with pytest.raises(ConfigError, match="not a valid name"):
        find_paper(name)
    for field in ("paper", "name"):
        with pytest.raises(ConfigError) as info:
            validate_config({"method": "ar_sgd", field: name})
        assert info.value.field == field and "not a valid name" in info.value.message


@pytest.mark.parametrize("name", FINE)
def test_a_plain_name_is_accepted(name: str) -> None:
    assert name_problem(name) is None and check_name(name, None, "paper") == name
    assert experiment_name(name) == f"distrepro/{name}"
    assert validate_config({"method": "ar_sgd", "paper": name, "name": name}).paper == name


def test_inside_refuses_a_path_that_resolves_outside_its_folder(tmp_path: Path) -> None:
    folder = tmp_path / "reports"
    folder.mkdir()
    assert inside(folder, "cadp", "report.md") == folder / "cadp" / "report.md"
    for parts in (("..", "x"), ("/etc/passwd",), ("a", "..", "..", "x")):
        with pytest.raises(ConfigError, match="outside this folder"):
            inside(folder, *parts)
    (folder / "link").symlink_to(tmp_path)  # a symlink out of the folder is outside too
    with pytest.raises(ConfigError, match="outside this folder"):
        inside(folder, "link", "index.html")


def test_report_with_a_hostile_paper_writes_nothing_anywhere(
    tmp_path: Path, mlflow_uri: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The census's case: ``report ../../../../escaped`` wrote report.html, runs.csv and index.html outside."""
    work = tmp_path / "a" / "b" / "c" / "d"
    work.mkdir(parents=True)
    monkeypatch.chdir(work)
    before = sorted(p for p in tmp_path.rglob("*") if "mlflow" not in p.name and "mlartifacts" not in str(p))
    with pytest.raises(ConfigError, match="not a valid name"):
        build_report("../../../../escaped", tracking_uri=mlflow_uri, log_to_mlflow=False)
    after = sorted(p for p in tmp_path.rglob("*") if "mlflow" not in p.name and "mlartifacts" not in str(p))
    assert after == before

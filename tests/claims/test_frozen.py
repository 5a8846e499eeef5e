"""Which files a registration freezes as the code the runs train with: the dataset a config names is found in
whichever root holds it, by file name or by its ``NAME``, without importing it."""

from __future__ import annotations

from pathlib import Path

import pytest
from tiny_paper import paper_root  # noqa: F401  (the fixture)

from distrepro.claims.frozen import TRAINING, _dataset_file, input_files

DATASET = 'NAME: str = "mine"\nDESCRIPTION = "a dataset of the user\'s root"\n'


@pytest.mark.smoke
def test_a_dataset_is_found_by_file_name_first_then_by_its_name(tmp_path: Path) -> None:
    first, second = tmp_path / "a" / "datasets", tmp_path / "b" / "datasets"
    for folder in (first, second):
        folder.mkdir(parents=True)
    (second / "mine.py").write_text("NAME = 'other'\n")
    (first / "my_data.py").write_text(DATASET)
    (first / "_private.py").write_text(DATASET)
    assert _dataset_file("mine", [first, second]) == second / "mine.py"  # a file named for it, in any root, wins
    (second / "mine.py").unlink()
    assert _dataset_file("mine", [first, second]) == first / "my_data.py"  # else the module declaring the name
    assert _dataset_file("absent", [first, second]) is None


def test_a_dataset_in_a_user_root_is_frozen_with_the_method(paper_root: Path, tmp_path: Path, monkeypatch) -> None:  # noqa: F811
    from distrepro.claims.papers import find_paper

    user = tmp_path / "user"
    (user / "datasets").mkdir(parents=True)
    (user / "datasets" / "my_data.py").write_text(DATASET)
    monkeypatch.setenv("DISTREPRO_PATH", str(user))
    config = paper_root / "methods" / "tiny" / "tiny.yaml"
    config.write_text(config.read_text().replace("dataset: {", "dataset: {name: mine, "))
    files = input_files(find_paper("tinypaper"), ["proxy"])[TRAINING]
    assert user / "datasets" / "my_data.py" in files
    assert not any(f.name == "synthetic.py" for f in files)  # the default is not frozen when a config names another

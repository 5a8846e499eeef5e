"""The parser of distrepro/cli/main.py: ``--version`` is looked up only when it is asked for."""

from __future__ import annotations

import importlib

import pytest

#: the module (``distrepro.cli.main`` as an attribute is the function the package re-exports)
cli_main = importlib.import_module("distrepro.cli.main")


@pytest.mark.smoke
def test_building_the_parser_does_not_look_the_version_up(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every command builds the parser (a watched ``run`` twice): finding the installed distribution there was paid
    by all of them, for a flag almost none is given."""

    def looked_up() -> str:
        raise AssertionError("the version was looked up without --version")

    monkeypatch.setattr(cli_main, "_version", looked_up)
    args = cli_main.build_parser().parse_args(["list"])
    assert args.command == "list"
    assert not hasattr(args, "version")  # the flag adds nothing to the namespace, as argparse's own did not


@pytest.mark.smoke
def test_version_prints_the_version_and_exits_0(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(cli_main, "_version", lambda: "9.8.7")
    with pytest.raises(SystemExit) as ended:
        cli_main.build_parser().parse_args(["--version"])
    assert ended.value.code == 0
    assert capsys.readouterr().out == "distrepro 9.8.7\n"


@pytest.mark.smoke
def test_version_is_the_installed_distributions() -> None:
    """The real lookup still answers (the installed distribution's version, else the package's own)."""
    import distrepro

    assert cli_main._version() in {distrepro.__version__, *_installed()}


def _installed() -> set[str]:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return {version("distrepro")}
    except PackageNotFoundError:
        return set()

"""The suite's one YAML reader (issue 27): what ``yaml.safe_load`` lets through is an error naming file, field, line."""

from __future__ import annotations

import datetime
import time
from pathlib import Path

import pytest

from distrepro import safe_yaml
from distrepro.errors import ConfigError
from distrepro.safe_yaml import MAX_DEPTH, load_yaml, read_yaml_mapping

pytestmark = pytest.mark.smoke


def refused(text: str) -> ConfigError:
    with pytest.raises(ConfigError) as info:
        load_yaml(text, "x.yaml")
    assert "\n" not in str(info.value) and info.value.source == "x.yaml"
    return info.value


@pytest.mark.parametrize(
    ("text", "field", "lines"),
    [
        ("a: 1\nb: 2\na: 3\n", "a", (3, 1)),
        ("x: {k: 1, k: 2}\n", "x.k", (1, 1)),
        ("x:\n  - {b: 1}\n  - b: 1\n    c: 2\n    b: 3\n", "x[1].b", (5, 3)),
        ("on: 1\ntrue: 2\n", "True", (2, 1)),  # YAML 1.1 reads both as the key True
        ("1: a\n0x1: b\n", "1", (2, 1)),
    ],
)
def test_a_duplicate_key_names_its_field_and_both_lines(text: str, field: str, lines: tuple[int, int]) -> None:
    error = refused(text)
    assert error.field == field
    assert f"at line {lines[0]} (first at line {lines[1]})" in error.message, error.message


def test_a_merge_key_may_be_overridden() -> None:
    data = load_yaml("base: &b {a: 1, c: 3}\nx:\n  <<: *b\n  a: 2\n")
    assert data == {"base": {"a": 1, "c": 3}, "x": {"a": 2, "c": 3}}


def test_an_alias_bomb_is_refused_at_once() -> None:
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]" for i in range(1, 10)]
    start = time.process_time()
    error = refused("\n".join(lines) + "\n")
    assert time.process_time() - start < 5.0  # CPU seconds: about 0.01 (expanding it would take minutes and GBs)
    assert "alias bomb" in error.message and error.field == "a5"  # 10^6 values: the first past the bound


def test_shared_aliases_below_the_bound_load() -> None:
    data = load_yaml("a: &a [1, 2]\nb: [*a, *a, *a]\n")
    assert data == {"a": [1, 2], "b": [[1, 2]] * 3}


@pytest.mark.parametrize("text", ["x: " + "[" * 5000 + "]" * 5000, "x: " + "{a: " * 100 + "1" + "}" * 100])
def test_deep_nesting_is_refused_without_a_recursion_error(text: str) -> None:
    error = refused(text)
    assert f"nested deeper than {MAX_DEPTH} levels" in error.message and "line 1" in error.message


def test_nesting_through_aliases_counts_too() -> None:
    deep = "[" * 60 + "1" + "]" * 60
    error = refused(f"a: &a {deep}\nb: " + "[" * 10 + "*a" + "]" * 10 + "\n")
    assert "aliases followed" in error.message and error.field is not None and error.field.startswith("b[0]")


def test_a_recursive_alias_is_refused() -> None:
    assert "recursive" in refused("a: &a [1, *a]\n").message


def test_exponents_are_floats_as_in_yaml_1_2() -> None:
    assert load_yaml("bw: 10.65e9\nlr: 1e-3\nname: 1e3x\n") == {"bw": 10.65e9, "lr": 1e-3, "name": "1e3x"}


def test_a_file_that_is_empty_or_not_a_mapping(tmp_path: Path) -> None:
    empty = tmp_path / "empty.yaml"
    empty.write_text("")
    assert read_yaml_mapping(empty, empty_ok=True) == {}
    listed = tmp_path / "list.yaml"
    listed.write_text("- 1\n")
    with pytest.raises(ConfigError, match="expected a mapping at the top level, got list"):
        read_yaml_mapping(listed)


def test_a_text_read_again_is_the_same_data_and_each_reader_its_own_copy() -> None:
    text = "a: &x [1, 2.5e3, {b: null}]\nc: *x\nd: 2026-11-28\n"
    first = load_yaml(text, "one.yaml")
    assert text in safe_yaml._PARSED  # kept: the next read copies instead of composing
    first["a"][2]["b"] = "changed"
    first["e"] = 1
    second = load_yaml(text, "two.yaml")
    assert second == {"a": [1, 2500.0, {"b": None}], "c": [1, 2500.0, {"b": None}], "d": datetime.date(2026, 11, 28)}
    assert second["a"] is second["c"]  # the alias is one object, as PyYAML builds it
    assert load_yaml(text) is not second


def test_a_refused_text_is_refused_again_naming_each_source() -> None:
    text = "a: 1\na: 2\n"
    for source in ("first.yaml", "second.yaml"):
        with pytest.raises(ConfigError, match=source):
            load_yaml(text, source)
    assert text not in safe_yaml._PARSED

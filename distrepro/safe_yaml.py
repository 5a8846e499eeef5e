"""The one YAML reader of the suite: run configs, ``--set`` values, hardware profiles, the workload table and
``paper.yaml`` all go through :func:`load_yaml`.

Why not ``yaml.safe_load``: it is safe against code execution, not against the other ways a file can
mislead or stall a program, and every one of these was met with a real file:

* **Duplicate keys** are accepted and the last one wins, so a second ``method_params:`` further down a
  config silently replaces the first. Here they are an error naming both lines.
* **Aliases** are expanded by whatever walks the data afterwards: ten nested aliases of ten items each
  ("billion laughs") are 10^10 values to validate, and the command sat silent for minutes. Here the
  values a document stands for, aliases expanded, are counted on the composed node graph (each node
  once) and refused above :data:`MAX_VALUES`; a recursive alias is refused too.
* **Nesting** is composed recursively by PyYAML: a few thousand ``[`` end in a ``RecursionError`` with
  thousands of lines of traceback. Here nesting, aliases followed, stops at :data:`MAX_DEPTH` levels.
* **Exponents**: PyYAML follows YAML 1.1, where ``10.65e9`` or ``1e-3`` is a *string*; read as YAML 1.2 (a
  float), as a user writing a bandwidth or a learning rate means it.

Every refusal is one :class:`~distrepro.errors.ConfigError` naming the file, the field and the line.

A document read before is not parsed again: the data of each text is kept (:data:`_PARSED`) and every reader gets
its own deep copy, so what one caller changes no other sees. A report read the same hardware profile, paper.yaml
and pre-registration record a hundred times (C-ADP's proxy report: 100 reads, 0.8 s of CPU, of a dozen texts),
and copying the data costs a small part of composing it again. Only data is kept: a refused document is refused
again, each time naming its own source.
"""

from __future__ import annotations

import copy
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from distrepro.errors import ConfigError, read_text_file, yaml_error

#: deepest nesting accepted, aliases followed; the suite's own files nest at most 7 levels
MAX_DEPTH = 64
#: most values (scalars, lists, mappings) a document may stand for once its aliases are expanded; the
#: largest shipped file (a 64-GPU profile) has about 3,000
MAX_VALUES = 200_000

_MERGE_TAG = "tag:yaml.org,2002:merge"


class _Loader(yaml.SafeLoader):
    """SafeLoader with a bounded composer (:data:`MAX_DEPTH`) and YAML 1.2 exponent floats."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._depth = 0

    def compose_node(self, parent: Any, index: Any) -> Any:
        self._depth += 1
        try:
            if self._depth > MAX_DEPTH:
                mark = self.peek_event().start_mark
                raise _Refused(None, f"YAML nested deeper than {MAX_DEPTH} levels", mark)
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1


_Loader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"^[-+]?(?:[0-9][0-9_]*\.?[0-9_]*|\.[0-9_]+)[eE][-+]?[0-9]+$"),
    list("-+0123456789."),
)


class _Refused(Exception):
    """A document refused for its structure: ``field`` (dotted) and ``mark`` (where) for the message."""

    def __init__(self, field: str | None, message: str, mark: Any = None) -> None:
        super().__init__(message)
        self.field, self.message, self.mark = field, message, mark


@dataclass
class _Walk:
    """What :func:`_check_graph` knows of each node already seen (by ``id``): nodes shared through aliases
    are visited once, so the walk is linear in the document's size, not in its expansion."""

    loader: _Loader
    sizes: dict[int, int] = field(default_factory=dict)
    heights: dict[int, int] = field(default_factory=dict)
    open: set[int] = field(default_factory=set)


def _where(mark: Any) -> str:
    return f" (at line {mark.line + 1}, column {mark.column + 1})" if mark is not None else ""


def _item(path: str, index: int) -> str:
    return f"{path}[{index}]"


def _key(path: str, key: Any) -> str:
    return f"{path}.{key}" if path else str(key)


def _shown(path: str | None) -> str | None:
    """A field path short enough for one line (an alias chain can make it thousands of characters)."""
    return path if path is None or len(path) <= 80 else path[:77] + "..."


def _check_mapping(walk: _Walk, node: yaml.MappingNode, path: str) -> list[tuple[str, yaml.Node]]:
    """The mapping's children with their paths; a key given twice is refused, naming both lines."""
    seen: dict[Any, yaml.Node] = {}
    children: list[tuple[str, yaml.Node]] = []
    for key_node, value_node in node.value:
        if key_node.tag == _MERGE_TAG:  # "<<: *base": merged keys may be overridden, by design
            children.append((path, value_node))
            continue
        key: Any = None
        if isinstance(key_node, yaml.ScalarNode):
            key = walk.loader.construct_object(key_node)  # 'on' and 'true', '1' and '0x1' are the same key
            try:
                first = seen.get(key)
            except TypeError:
                first = None
            if first is not None:
                raise _Refused(
                    _key(path, key),
                    f"duplicate key '{key}' at line {key_node.start_mark.line + 1} (first at line "
                    f"{first.start_mark.line + 1}): the second would silently replace the first; merge them or "
                    "delete one",
                )
            seen[key] = key_node
        children.append((_key(path, key if isinstance(key_node, yaml.ScalarNode) else "?"), value_node))
    return children


def _check_graph(walk: _Walk, node: yaml.Node, path: str, depth: int) -> tuple[int, int]:
    """(values, height) of ``node`` with aliases expanded; refuses cycles, depth and size beyond the limits."""
    key = id(node)
    if key in walk.open:
        raise _Refused(path or None, "recursive YAML alias (a value that contains itself)", node.start_mark)
    if key in walk.sizes:
        size, height = walk.sizes[key], walk.heights[key]
    else:
        if depth > MAX_DEPTH:
            raise _Refused(
                path or None, f"YAML nested deeper than {MAX_DEPTH} levels (aliases followed)", node.start_mark
            )
        size, height = 1, 1
        if isinstance(node, (yaml.MappingNode, yaml.SequenceNode)):
            walk.open.add(key)
            if isinstance(node, yaml.MappingNode):
                children = _check_mapping(walk, node, path)
            else:
                children = [(_item(path, i), child) for i, child in enumerate(node.value)]
            for child_path, child in children:
                child_size, child_height = _check_graph(walk, child, child_path, depth + 1)
                size += child_size
                height = max(height, child_height + 1)
                if size > MAX_VALUES:
                    break
            walk.open.discard(key)
        walk.sizes[key], walk.heights[key] = size, height
    if depth + height - 1 > MAX_DEPTH:
        raise _Refused(path or None, f"YAML nested deeper than {MAX_DEPTH} levels (aliases followed)", node.start_mark)
    if size > MAX_VALUES:
        raise _Refused(
            path or None,
            f"YAML aliases expand to more than {MAX_VALUES:,} values (an alias bomb?); write the values out",
            node.start_mark,
        )
    return size, height


#: the data of each YAML text read so far (at most :data:`_PARSED_MAX` texts of up to :data:`_PARSED_CHARS`)
_PARSED: dict[str, Any] = {}
_PARSED_MAX = 128
_PARSED_CHARS = 200_000  # the largest shipped YAML file is 108 kB: at most ~26 MB of text kept


def load_yaml(text: str, source: str | Path | None = None) -> Any:
    """The data of one YAML document (None for an empty one), the caller's own copy; every problem is a
    :class:`ConfigError`."""
    if text in _PARSED:
        return copy.deepcopy(_PARSED[text])
    data = _parse(text, source)
    if len(text) <= _PARSED_CHARS:
        if len(_PARSED) >= _PARSED_MAX:
            _PARSED.clear()
        _PARSED[text] = copy.deepcopy(data)
    return data


def _parse(text: str, source: str | Path | None) -> Any:
    """:func:`load_yaml` without the memo."""
    try:
        loader = _Loader(text)  # its reader refuses control characters (a binary file) here already
    except yaml.YAMLError as exc:
        raise yaml_error(source, exc) from None
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        _check_graph(_Walk(loader), node, "", 1)
        return loader.construct_document(node)
    except _Refused as exc:
        raise ConfigError(source, _shown(exc.field), f"{exc.message}{_where(exc.mark)}") from None
    except yaml.YAMLError as exc:
        raise yaml_error(source, exc) from None
    except RecursionError:  # a deep structure the bounds above did not foresee: still one line
        raise ConfigError(source, None, "YAML nested too deeply to read") from None
    finally:
        loader.dispose()


def _not_a_file(path: Path, what: str) -> str:
    """Why ``path`` cannot be read as a file: missing, a folder, a symlink loop, or a FIFO/socket/device (which
    would block or never end) -- each said as it is, not all as "not found"."""
    import stat

    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        return f"{what} not found" if not path.is_symlink() else f"{what} is a symlink to nothing"
    except OSError as exc:  # ELOOP: a symlink loop; EACCES: a folder on the way we may not enter
        return f"{what} cannot be opened: {exc.strerror or exc}"
    if stat.S_ISDIR(mode):
        return f"{what} is a folder, not a file"
    return f"{what} is not a regular file (a FIFO, a socket or a device): give a YAML file"


def read_yaml_mapping(path: str | Path, what: str = "file", empty_ok: bool = False) -> dict[str, Any]:
    """Read a YAML file whose top level is a mapping (``{}`` for an empty file when ``empty_ok``)."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(path, None, _not_a_file(path, what))
    data = load_yaml(read_text_file(path, what), path)
    if data is None and empty_ok:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(path, None, f"expected a mapping at the top level, got {type(data).__name__}")
    return data

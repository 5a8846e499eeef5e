"""Papers and run configs by name, read from the plugin roots' files without importing any plugin (nor torch).

The CLI answers a mistyped paper, method folder or config at once, in one line with the closest names
(:func:`distrepro.errors.did_you_mean`), before a command imports torch or mlflow (seconds on a busy machine).
Only ``methods/*/paper.yaml`` files are read here; a malformed one is left to
:func:`distrepro.claims.papers.find_paper`, which says what is wrong with it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from distrepro.errors import DistreproError, close_matches, did_you_mean
from distrepro.plugins.roots import RootArg, as_roots, method_dirs
from distrepro.safe_yaml import read_yaml_mapping


@dataclass(frozen=True)
class PaperEntry:
    """A paper id as the ``paper.yaml`` files cite it: its title, the method folders citing it, and whether one of
    them holds its reproduction (``claims`` or ``setup``)."""

    id: str
    title: str
    methods: tuple[str, ...]
    reproducible: bool


def papers(root: RootArg = None) -> dict[str, PaperEntry]:
    """Every cited paper id over the roots (unreadable ``paper.yaml`` files skipped), by id."""
    found: dict[str, PaperEntry] = {}
    for name, folder in method_dirs(root).items():
        path = folder / "paper.yaml"
        try:
            raw = read_yaml_mapping(path) if path.is_file() else {}
        except DistreproError:
            continue
        cite = raw.get("citation")
        if not isinstance(cite, dict) or not isinstance(cite.get("id"), str) or not cite["id"]:
            continue
        pid = cite["id"]
        before = found.get(pid)
        title = str(cite.get("title") or pid)
        holds = "claims" in raw or "setup" in raw
        if before is None:
            found[pid] = PaperEntry(pid, title, (name,), holds)
        else:
            found[pid] = PaperEntry(
                pid, title if holds else before.title, (*before.methods, name), before.reproducible or holds
            )
    return found


def _method_of(name: str, entries: dict[str, PaperEntry]) -> tuple[str, str] | None:
    """(method folder, paper id) where ``name`` is, up to case, a method folder citing a paper."""
    for entry in entries.values():
        for method in entry.methods:
            if method.lower() == name.lower():
                return method, entry.id
    return None


def resolve_paper(name: str, root: RootArg = None, strict: bool = True) -> tuple[str, str | None]:
    """The paper id ``name`` means, and a note when it is not ``name`` itself: the id up to case (``Chao``), or the
    paper whose method folder ``name`` is (``chao_alloc is the method of paper 'chao'``). ``strict``: an unknown
    name is a :class:`~distrepro.errors.DistreproError` with the closest paper ids; else it comes back unchanged
    (``report`` also reads papers known only to the tracking store)."""
    entries = papers(root)
    if name in entries:
        return name, None
    same = [pid for pid in entries if pid.lower() == name.lower()]
    if len(same) == 1:
        return same[0], f"'{name}' read as paper '{same[0]}'"
    method = _method_of(name, entries)
    if method is not None:
        return method[1], f"{method[0]} is the method of paper '{method[1]}'"
    if not strict:
        return name, None
    raise DistreproError(unknown_paper_message(name, entries))


def unknown_paper_message(name: str, entries: dict[str, PaperEntry]) -> str:
    """``unknown paper 'chaos'; did you mean 'chao'?; known: ...``: suggestions among the reproducible papers' ids,
    and the papers of close method folder names."""
    known = sorted(pid for pid, e in entries.items() if e.reproducible)
    by_method = {m: e.id for e in entries.values() if e.reproducible for m in e.methods}
    guesses = close_matches(name, [*known, *by_method])
    meant = list(dict.fromkeys(by_method.get(g, g) for g in guesses))
    hint = "; did you mean " + " or ".join(repr(m) for m in meant) + "?" if meant else ""
    return f"unknown paper '{name}'{hint} (known: {', '.join(known) or 'none'})"


def config_files(root: RootArg = None) -> list[str]:
    """Run configs over the roots, as paths relative to their root: ``configs/*.yaml`` and
    ``methods/*/configs/*.yaml``."""
    found: list[str] = []
    for base in as_roots(root):
        for pattern in ("configs/*.yaml", "methods/*/configs/*.yaml"):
            found += [p.relative_to(base).as_posix() for p in sorted(base.glob(pattern)) if p.is_file()]
    return list(dict.fromkeys(found))


def config_hint(given: str, root: RootArg = None) -> str:
    """``; did you mean 'methods/qsr/configs/qsr.yaml'?`` for a config path that is not a file: the closest by
    whole relative path, else by file name."""
    files = config_files(root)
    hint = did_you_mean(given, files, n=1)
    if hint:
        return hint
    by_name: dict[str, str] = {}
    for f in files:
        by_name.setdefault(Path(f).name, f)
    found = close_matches(Path(given).name, by_name, n=1)
    return "; did you mean " + " or ".join(repr(by_name[m]) for m in found) + "?" if found else ""

"""The one writer of the files distrepro produces: kept inside their folder, written atomically.

``reports/`` is tracked, so a symbolic link committed there (``reports/index.html -> ~/.bashrc``, or a
``reports/<paper>/figures`` folder linked to ``/etc``) acts on anyone who clones the repository and runs
``reproduce``: a plain ``write_text`` follows it and overwrites the target. Every file a report, the papers index
or a reproduction writes goes through :func:`checked` here instead: the target and every folder on the way to it,
from ``within`` (the folder it must stay in) down, are looked at one by one, and a component that is a link leading
outside ``within`` is refused with one line naming it, before anything is written or removed. A link that stays
inside is followed. The file itself is written to a temporary file beside its (resolved) target and moved over it
(``os.replace``), so a reader never sees half a file and a failed write leaves the old one.

``within`` itself may be a link (a ``reports`` folder kept on another disk is the user's choice); only what lies
below it is checked.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Callable
from pathlib import Path

from distrepro.errors import DistreproError


def _read_umask() -> int:
    """This process's umask (read once, at import: setting it to read it is not thread-safe)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


#: a written file's mode: what ``open(path, "w")`` would give it
_FILE_MODE = 0o666 & ~_read_umask()


class UnsafePath(DistreproError):
    """A file to write lies, through a symbolic link, outside the folder it must stay in."""


def checked(within: str | Path, path: str | Path) -> Path:
    """``path`` (a path under ``within``: ``within / name``, absolute or not) resolved, after checking that no
    component of it below ``within`` is a link leading outside ``within``; :class:`UnsafePath` naming the path and
    the component otherwise. ``..`` is collapsed as written first, so it never climbs out of ``within`` either."""
    base = Path(within).resolve()
    given = Path(os.path.abspath(path))
    rel = None
    for root in (Path(os.path.abspath(within)), base):
        with contextlib.suppress(ValueError):
            rel = given.relative_to(root)
            break
    if rel is None:
        raise UnsafePath(f"refusing to write {path}: it is outside {within}")
    current = base
    for part in rel.parts:
        step = current / part
        if step.is_symlink():
            target = step.resolve()
            if target != base and not target.is_relative_to(base):
                shown = Path(within) / step.relative_to(base) if step.is_relative_to(base) else step
                what = "it" if step == base / rel else str(shown)
                raise UnsafePath(f"refusing to write {path}: {what} is a symbolic link to {target}, outside {within}")
            current = target
        else:
            current = step
    return current


class WriteError(DistreproError):
    """A file cannot be written where it goes: a folder on its way is a file, it is a folder, a folder is read-only."""


def cannot_write(path: str | Path, exc: OSError, folder: bool = False) -> WriteError:
    """One line naming what stands in the way of writing the file (or making the ``folder``) ``path``: a
    ``reports/`` that is a file, a ``runs.csv`` that is a folder, a read-only method folder ended in an unexpected
    ``OSError``."""
    import errno

    target = Path(path)
    what = f"cannot make the folder {path}" if folder else f"cannot write {path}"
    if target.is_dir() and not folder:
        return WriteError(f"{what}: it is a folder; move it away")
    for step in [*reversed(target.parents), *([target] if folder else [])]:
        if step.exists() and not step.is_dir():
            return WriteError(f"{what}: {step} is a file, not a folder; move it away")
    if isinstance(exc, PermissionError) or exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        where = next((f for f in [target, *target.parents] if f.exists()), target)
        return WriteError(f"{what}: {where} is not writable ({exc.strerror})")
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return WriteError(f"{what}: its disk is full ({exc.strerror})")
    return WriteError(f"{what}: {exc.strerror or exc}")


def make_folder(path: str | Path) -> Path:
    """``path`` and the folders above it, made; what stands in the way is one :class:`WriteError` naming it."""
    try:
        Path(path).mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise cannot_write(path, exc, folder=True) from exc
    return Path(path)


def write_with(within: str | Path, path: str | Path, write: Callable[[Path], object]) -> Path:
    """Call ``write(tmp)`` to write a temporary file of the same name in a scratch folder beside ``path`` (so a
    writer that picks its format or title by the name picks the right one), then move it over ``path``. ``path``
    is checked by :func:`checked` first, its folders made (checked too). Returns ``path``; what stands in the way
    is one :class:`WriteError` naming it (:func:`cannot_write`)."""
    try:
        return _write_with(within, path, write)
    except OSError as exc:
        raise cannot_write(path, exc) from exc


def _write_with(within: str | Path, path: str | Path, write: Callable[[Path], object]) -> Path:
    target = checked(within, path)
    target.parent.mkdir(parents=True, exist_ok=True)
    target = checked(within, path)  # a folder made just now is a folder, but check what exists once more
    scratch = Path(tempfile.mkdtemp(dir=target.parent, prefix=f".{target.name}."))
    tmp = scratch / target.name
    try:
        tmp.touch(mode=_FILE_MODE)
        tmp.chmod(_FILE_MODE)
        write(tmp)
        os.replace(tmp, target)
    finally:
        with contextlib.suppress(OSError):
            tmp.unlink()
        with contextlib.suppress(OSError):
            scratch.rmdir()
    return Path(path)


def write_text(within: str | Path, path: str | Path, text: str) -> Path:
    """``text`` (UTF-8) to ``path`` inside ``within``, atomically (:func:`write_with`)."""
    return write_with(within, path, lambda tmp: tmp.write_text(text, encoding="utf-8"))


def write_bytes(within: str | Path, path: str | Path, data: bytes) -> Path:
    """``data`` to ``path`` inside ``within``, atomically (:func:`write_with`)."""
    return write_with(within, path, lambda tmp: tmp.write_bytes(data))


def remove(within: str | Path, path: str | Path) -> None:
    """Remove the file ``path`` inside ``within`` (checked as a write is: never a file reached through a link
    leading outside); a file already gone is fine."""
    target = checked(within, path)
    with contextlib.suppress(FileNotFoundError):
        target.unlink()

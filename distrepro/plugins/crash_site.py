"""Where a plugin crashed: the innermost traceback frame inside a plugin, for one line a plugin author can act on.

A method's exception reaches the user through an engine (``worker rank 0 failed: RuntimeError: ...``); without a
location the author has to rerun with ``--debug`` just to learn which of their lines raised. The engines append
:func:`crash_site` to that line: `` (at methods/x/method.py:42 in train_step; --debug shows the traceback)``.

A frame belongs to a plugin when its module was imported by the registry (``_distrepro_methods.<name>...``,
``_distrepro_datasets...``) or its file lies in a root's ``methods/`` or ``datasets/``
folder (:mod:`distrepro.plugins.roots`). The path shown starts at that folder, so it reads the same in a
checkout, a wheel install (``distrepro/_shipped``) and a user root.
"""

from __future__ import annotations

import traceback
from pathlib import Path

from distrepro.data.loading import PLUGIN_PACKAGE as DATASET_PACKAGE
from distrepro.plugins.registry import METHOD_PACKAGE
from distrepro.plugins.roots import roots

#: module prefixes of imported plugins: the private packages methods and datasets are imported under
PLUGIN_MODULE_PREFIXES = (f"{METHOD_PACKAGE}.", f"{DATASET_PACKAGE}.")
#: the folders of a root that hold plugin code
PLUGIN_CODE_DIRS = ("methods", "datasets")

DEBUG_HINT = "--debug shows the traceback"


def _under_plugin_dir(filename: str) -> str | None:
    """``methods/x/method.py`` for a file in a root's plugin folder, else None."""
    path = Path(filename)
    try:
        bases = roots()
    except Exception:  # a bad DISTREPRO_PATH must not hide the crash being described
        bases = ()
    for base in bases:
        for folder in PLUGIN_CODE_DIRS:
            if path.is_relative_to(base / folder):
                return path.relative_to(base).as_posix()
    return None


def _shown_path(filename: str) -> str:
    """The path from the last ``methods``/``datasets`` component on (``methods/x/method.py``), else the file."""
    parts = Path(filename).parts
    for index in range(len(parts) - 1, -1, -1):
        if parts[index] in PLUGIN_CODE_DIRS:
            return Path(*parts[index:]).as_posix()
    return filename


def plugin_frame(exc: BaseException) -> tuple[str, int, str] | None:
    """(path from the plugin folder, line, function) of the innermost frame inside a plugin, else None."""
    found: tuple[str, int, str] | None = None
    for frame, lineno in traceback.walk_tb(exc.__traceback__):
        module = str(frame.f_globals.get("__name__", ""))
        filename = frame.f_code.co_filename
        shown = _under_plugin_dir(filename)
        if shown is None and module.startswith(PLUGIN_MODULE_PREFIXES):
            shown = _shown_path(filename)
        if shown is not None:
            found = (shown, lineno, frame.f_code.co_name)
    if found is None and exc.__cause__ is not None and exc.__cause__ is not exc:
        return plugin_frame(exc.__cause__)
    return found


def crash_site(exc: BaseException) -> str:
    """`` (at methods/x/method.py:42 in train_step; --debug shows the traceback)``, or ``""`` when no frame of the
    traceback is a plugin's (a bug in the harness: ``--debug`` shows it)."""
    frame = plugin_frame(exc)
    if frame is None:
        return ""
    path, line, function = frame
    return f" (at {path}:{line} in {function}; {DEBUG_HINT})"

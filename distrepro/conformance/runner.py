"""``distrepro test METHOD``: run the packaged generated tests (:mod:`.test_generated`) on one method.

pytest is run in this process on the test module's file, so the same code runs from a checkout and from an
installed wheel; the method must be found in the roots first, so a typo is one line, not a pytest session.
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Sequence
from pathlib import Path

from distrepro.errors import DistreproError, PluginError
from distrepro.plugins import registry

TEST_FILE = Path(__file__).with_name("test_generated.py")


def run_tests(methods: Sequence[str], pytest_args: Sequence[str] = ()) -> int:
    """pytest's exit status for the generated tests of ``methods`` (each found in the roots, or a
    :class:`~distrepro.errors.PluginError` as ``distrepro run`` would give)."""
    if importlib.util.find_spec("pytest") is None:
        raise DistreproError("distrepro test needs pytest: pip install 'distrepro[test]' (or 'distrepro[dev]')")
    for name in methods:
        registry.get_method(name)  # unknown or broken: the registry's one-line error
    if not methods:
        raise PluginError("distrepro test: name at least one method")
    import pytest

    os.environ["DISTREPRO_TEST_METHODS"] = ",".join(methods)
    # rootdir and no ini file: a pytest.ini or pyproject.toml of the working folder must not change the run
    args = [str(TEST_FILE), "-p", "no:cacheprovider", "--rootdir", str(TEST_FILE.parent), "-c", os.devnull]
    return int(pytest.main([*args, "-q", *pytest_args]))

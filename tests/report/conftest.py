"""Fixtures shared by this folder's tests (defined in tests/_support so other folders can use them too)."""

from exact_emulator import exact_emulator  # noqa: F401  (the fixture)
from tiny_paper import paper_root  # noqa: F401  (the fixture)

"""``python -m distrepro.cli``: the same as the ``distrepro`` command (:mod:`distrepro.cli.console`)."""

from distrepro.cli.console import console

console()

"""``python -m distrepro.cli``: the same as the ``distrepro`` command."""

import sys

from distrepro.cli.main import main

sys.exit(main())

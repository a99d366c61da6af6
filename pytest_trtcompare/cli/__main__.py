"""`python -m pytest_trtcompare.cli`, the same as the `trtcompare` console script."""

from __future__ import annotations

import sys

from . import main

sys.exit(main())

"""Bytecode for the packages a benchmark's processes import, as an installed package has it.

pip compiles a package's modules when it installs it. A checkout run with
PYTHONDONTWRITEBYTECODE=1 (as on the reference machine), or a package copied by `git
archive` for `--baseline`, has no current .pyc for the modules changed since, so every
process would compile them again: on the reference machine that added about 0.1 s to a
pytest process of a small golden suite (0.05-0.07 s of the plugin's imports), more than
several targets measure. The benchmarks that time processes call `compile_packages` first.
"""

from __future__ import annotations

import compileall
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "pytest_trtcompare"


def compile_packages(*folders: str | Path | None) -> None:
    """Write current .pyc files for this checkout's package and each folder given (a
    `--baseline` copy); up-to-date ones are left as they are."""
    for folder in (PACKAGE, *folders):
        if folder is not None and Path(folder).is_dir():
            compileall.compile_dir(str(folder), quiet=1)

"""Path options written with a space: pytest chooses its rootdir and ini file before plugins
add options, so `--trt-goldens-dir DIR` with an existing DIR can move both (pytest reads DIR
as a test path). The run stops and asks for `--trt-goldens-dir=DIR`.
"""

from __future__ import annotations

import inspect
import itertools
import os
import shlex
from pathlib import Path

import pytest

from . import names

#: Options whose value is a path: written with a space, pytest reads the value as a test path
#: while it looks for the rootdir and ini file, before this plugin's options exist.
PATH_OPTIONS = (
    *names.names("--trt-goldens-dir"),
    *names.names("--trt-report"),
    *names.names("--trt-artifacts-dir"),
    "--trt-engine-cache",
)


def check_split_paths(config: pytest.Config) -> None:
    """`--trt-goldens-dir DIR` with an existing DIR moved pytest's rootdir and ini file: stop
    and say to write `--trt-goldens-dir=DIR` (with `=`, pytest never mistakes DIR for a test
    path)."""
    args = [*shlex.split(os.environ.get("PYTEST_ADDOPTS", "")), *config.invocation_params.args]
    for option, value in itertools.pairwise(args):
        if option not in PATH_OPTIONS:
            continue
        if not (Path(config.invocation_params.dir) / value).exists():
            continue  # pytest ignores paths that do not exist when it looks for the rootdir
        if _rootdir_unchanged(config):
            return
        raise pytest.UsageError(
            f"{option} {value}: pytest took {value!r} for a test path while it chose the "
            f"rootdir ({config.rootpath}) and ini file; write {option}={value}"
        )


def _rootdir_unchanged(config: pytest.Config) -> bool:
    """Whether pytest finds the same rootdir and ini file from the real test paths alone."""
    try:  # private: pytest has no public way to ask where a set of paths puts the rootdir
        from _pytest.config.findpaths import determine_setup

        given = {
            "inifile": config.option.inifilename,
            "override_ini": config.option.override_ini,  # pytest 8.1 on
            "args": [str(a) for a in config.option.file_or_dir or []],
            "rootdir_cmd_arg": config.option.rootdir or None,
            "invocation_dir": Path(config.invocation_params.dir),
        }
        taken = inspect.signature(determine_setup).parameters
        rootpath, inipath, *_ = determine_setup(**{k: v for k, v in given.items() if k in taken})
    except Exception:  # pytest changed its private API: be safe and ask for the = form
        return False
    return bool(rootpath == config.rootpath and inipath == config.inipath)

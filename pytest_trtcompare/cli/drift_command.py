"""`trtcompare drift OLD.json NEW.json`: the outputs whose margin drifted toward failing
between two JSON reports (reports/drift.py), as `--trt-baseline` shows them.

Exit status: 0 without drift, 1 with drift, 2 for a report that cannot be read.
"""

from __future__ import annotations

import argparse
import shutil
from pathlib import Path
from typing import Any

from ..errors import ReportError
from ..reports.document import read_report
from ..reports.drift import LIMIT, RATIO, drift, drift_lines, margins


def add_parser(commands: Any) -> None:
    parser = commands.add_parser(
        "drift",
        help="list the outputs whose margin drifted toward failing between two --trt-report "
        "files; exit 1 on drift",
    )
    parser.add_argument("old", type=Path, metavar="OLD.json", help="the baseline report")
    parser.add_argument("new", type=Path, metavar="NEW.json", help="the report to judge")
    parser.add_argument(
        "--ratio",
        type=float,
        default=RATIO,
        help=f"a margin this many times the old one (default {RATIO:g})",
    )
    parser.add_argument(
        "--margin",
        type=float,
        default=LIMIT,
        help=f"a margin that crosses this from below (default {LIMIT:g})",
    )
    parser.add_argument("-v", "--verbose", action="count", default=0, help="list new and gone")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    if not args.ratio > 1 or not args.margin > 0:
        raise ReportError(
            f"--ratio {args.ratio:g} / --margin {args.margin:g}: take numbers above 1 / 0"
        )
    old, new = read_report(args.old), read_report(args.new)
    found = drift(margins(old.records), new.records, args.ratio, args.margin)
    width = shutil.get_terminal_size().columns
    print("\n".join(drift_lines(found, str(args.old), width, args.verbose)))
    return 1 if found else 0

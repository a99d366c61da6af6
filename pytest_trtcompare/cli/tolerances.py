"""`trtcompare tolerances REPORT.json...`: the tolerances that the errors in JSON reports of
ordinary runs suggest (several runs, machines or shards), written to the tolerance file that
`--trt-calibrate` writes and later runs read (reports/calibration.py: the rule and the file).
For the tests a calibration cannot run again: the `compare` fixture, `golden.check` on
outputs the test computed.

Exit status: 0, also when no output could be calibrated (it says so); 2 for a report or a
tolerance file that cannot be read.
"""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path
from typing import Any

from ..atomic import atomic_write_bytes
from ..errors import ReportError
from ..reports.calibration import (
    FACTOR,
    FILE_NAME,
    calibration_lines,
    observed_from,
    read_calibration,
    suggest,
    to_toml,
)
from ..reports.document import read_report
from ..session.layout import counted


def add_parser(commands: Any) -> None:
    parser = commands.add_parser(
        "tolerances",
        help="suggest tolerances from the errors in --trt-report files and write them to "
        "the tolerance file later runs read",
    )
    parser.add_argument(
        "reports", type=Path, nargs="+", metavar="REPORT.json", help="--trt-report files"
    )
    parser.add_argument(
        "-o",
        "--output",
        default=FILE_NAME,
        metavar="FILE.toml",
        help=f"the tolerance file to write, its entries of other tests kept (default "
        f"{FILE_NAME}: run this in the rootdir, whose node ids the reports hold); - prints it",
    )
    parser.add_argument(
        "--factor",
        type=float,
        default=FACTOR,
        help=f"atol = this x the worst abs error (default {FACTOR:g})",
    )
    parser.add_argument("-v", "--verbose", action="count", default=0, help="list every output")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    if not args.factor >= 1:
        raise ReportError(f"--factor {args.factor:g}: takes a number >= 1")
    reports = [read_report(path) for path in args.reports]
    observed = observed_from(record for report in reports for record in report.records)
    if not observed:
        print(
            f"no output to calibrate in {counted(len(reports), 'report')} (outputs that atol "
            "bounds: not metric checks, top-k, missing outputs, layers or xfailed tests)"
        )
        return 0
    printing = args.output == "-"
    target = Path(args.output)
    if not printing and not target.parent.is_dir():
        raise ReportError(f"-o {args.output}: {target.parent} is no folder here")
    earlier = read_calibration(target) if not printing and target.exists() else None
    made = suggest(observed, counted(len(reports), "report"), args.factor, earlier)
    command = "trtcompare tolerances " + " ".join(str(path) for path in args.reports)
    text = to_toml(made, command)
    written = "suggested"
    if printing:
        sys.stdout.write(text)
    else:
        atomic_write_bytes(target, text.encode())
        written = f"written {target}"
    width = shutil.get_terminal_size().columns
    lines = calibration_lines(observed, made, written, width, args.verbose)
    print("\n".join(lines), file=sys.stderr if printing else sys.stdout)
    return 0

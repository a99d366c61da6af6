"""`trtcompare merge`: the JSON reports of one suite run in pieces as one report.

    trtcompare merge shard-*.json -o all.json [-q] [--goldens-dir DIR [--prune | --strict]]

Prints the accuracy summary as the plugin prints it at session end (-q: the failing outputs
and the totals), names the tests found in several reports (a rerun: the last report's
records are kept), and with `--goldens-dir` the goldens under DIR that no shard used (their
modules' tests all ran and passed somewhere; see reports/golden_use.py), which `--prune`
deletes. Exit status: 0; 1 with `--strict` when goldens are unused; 2 for a report that is
unreadable, damaged, of another report format or of another suite.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import shutil
from pathlib import Path
from typing import Any

from ..errors import ReportError
from ..reports.document import Merged, merge, merged_json, read_report
from ..reports.golden_use import unused_goldens
from ..reports.summary import format_summary
from ..session.layout import wrap


def add_parser(commands: Any) -> None:
    parser = commands.add_parser(
        "merge",
        help="join the --trt-report files of one suite run in pieces (shards, reruns, "
        "machines): one report and its accuracy summary",
    )
    parser.add_argument("reports", nargs="+", type=Path, metavar="REPORT.json")
    parser.add_argument("-o", "--output", type=Path, help="write the merged report here")
    parser.add_argument("-q", "--quiet", action="count", default=0, help="as pytest's -q")
    parser.add_argument("-v", "--verbose", action="count", default=0, help="every output")
    parser.add_argument(
        "--goldens-dir",
        type=Path,
        metavar="DIR",
        help="name the goldens under DIR that no shard used (run where the suite's goldens "
        "are: its rootdir)",
    )
    action = parser.add_mutually_exclusive_group()
    action.add_argument("--prune", action="store_true", help="delete those unused goldens")
    action.add_argument("--strict", action="store_true", help="exit 1 when goldens are unused")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    root = Path.cwd()
    if args.goldens_dir is not None and not args.goldens_dir.is_dir():
        raise ReportError(
            f"--goldens-dir {args.goldens_dir}: no such folder here ({root}); run the merge "
            "in the suite's rootdir, where the reports' paths lie"
        )
    merged = merge([read_report(path) for path in args.reports], root)
    verbosity = args.verbose - args.quiet
    width = shutil.get_terminal_size().columns
    lines = format_summary(merged.records, verbosity, width)
    if lines:
        print(f"accuracy summary ({len(args.reports)} reports)")
        print("\n".join(lines))
    for duplicate in merged.duplicates:
        print("\n".join(wrap(f"in several reports: {duplicate}", width)))
    if args.output is not None:
        version = importlib.metadata.version("pytest-trtcompare")
        args.output.parent.mkdir(parents=True, exist_ok=True)
        args.output.write_text(merged_json(merged, version, root))
        if verbosity >= 0:
            print(f"merged report: {args.output}")
    if args.goldens_dir is None:
        return 0
    unused = _unused(merged, args.goldens_dir.resolve(), root, verbosity, width)
    if args.prune:
        for path in unused:
            Path(path).unlink(missing_ok=True)
            print(f"  pruned: {_shown(path, root)}")
        return 0
    for path in unused:
        print(f"  unused: {_shown(path, root)}")
    if unused:
        hint = "exit status 1 (--strict)" if args.strict else "delete them with --prune"
        print(f"  ({hint})")
    return 1 if unused and args.strict else 0


def _unused(merged: Merged, folder: Path, root: Path, verbosity: int, width: int) -> list[str]:
    """The unused goldens under `folder`, after a line saying what was judged."""
    modules = {
        name: module
        for name, module in merged.modules.items()
        if module.folder.resolve().is_relative_to(folder)
    }
    used = {str((root / path).resolve()) for path in merged.used}
    for module in modules.values():
        module.folder = module.folder.resolve()
    unused, not_judged = unused_goldens(modules, merged.passed, used)
    judged = len(modules) - len(not_judged)
    print(
        f"goldens under {_shown(str(folder), root)}: {judged} modules judged, unused {len(unused)}"
    )
    if not_judged and verbosity >= 0:
        text = (
            f"  not judged ({len(not_judged)}: a test not run in any report, failed or "
            f"skipped): {', '.join(sorted(not_judged))}"
        )
        print("\n".join(wrap(text, width)))
    return sorted(unused)


def _shown(path: str, root: Path) -> str:
    try:
        return str(Path(path).relative_to(root))
    except ValueError:
        return path

"""`trtcompare merge`: the JSON reports of one suite run in pieces as one report.

    trtcompare merge shard-*.json -o all.json [-q] [--goldens-dir DIR [--prune | --strict]]

Prints the accuracy summary as the plugin prints it at session end (-q: the failing outputs
and the totals), names the tests run in several reports (the newest report's outcome is
kept) and the tests that ran in none (a missing shard?), and with `--goldens-dir` the
goldens under DIR that no shard used (their modules' tests all ran and passed; see
reports/golden_use.py), which `--prune` deletes. Exit status: 0, failing outputs included
(the shards' own pytest runs fail on them); 1 with `--strict` when goldens are unused; 2
for a report that cannot be merged (unreadable, damaged, of another report format or of
another suite) or a misuse.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import shutil
from pathlib import Path
from typing import Any

from ..errors import ReportError
from ..goldens import iter_goldens
from ..reports.document import Merged, merge, merged_json, read_report
from ..reports.golden_use import unused_goldens
from ..reports.summary import format_summary
from ..session.layout import counted, wrap

_SHOWN = 8  # names listed in one line, then '(+N more)'


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
        "are: its rootdir; DIR as the reports name it, tests/goldens for goldens beside "
        "tests/test_*.py)",
    )
    action = parser.add_mutually_exclusive_group()
    action.add_argument("--prune", action="store_true", help="delete those unused goldens")
    action.add_argument("--strict", action="store_true", help="exit 1 when goldens are unused")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    root = Path.cwd()
    _check_arguments(args)
    merged = merge([read_report(path) for path in args.reports], root)
    folder = None if args.goldens_dir is None else _goldens_folder(args.goldens_dir, merged)
    verbosity = args.verbose - args.quiet
    width = shutil.get_terminal_size().columns
    lines = format_summary(merged.records, verbosity, width)
    if lines:
        print(f"accuracy summary ({counted(len(args.reports), 'report')})")
        print("\n".join(lines))
    for line in _pieces(merged, verbosity):
        print("\n".join(wrap(line, width)))
    if args.output is not None:
        version = importlib.metadata.version("pytest-trtcompare")
        args.output.write_text(merged_json(merged, version, root))
        if verbosity >= 0:
            print(f"merged report: {args.output}")
    if folder is None:
        return 0
    unused = _unused(merged, folder, root, width)
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


def _check_arguments(args: argparse.Namespace) -> None:
    """Misuses found before any report is read: exit 2 with one line."""
    if (args.prune or args.strict) and args.goldens_dir is None:
        flag = "--prune" if args.prune else "--strict"
        raise ReportError(f"{flag} judges goldens: give --goldens-dir DIR too")
    given = [path.resolve() for path in args.reports]
    twice = sorted({str(p) for p in args.reports if given.count(p.resolve()) > 1})
    if twice:
        raise ReportError(f"report(s) given twice: {', '.join(twice)}")
    if args.output is not None:
        if args.output.resolve() in given:
            raise ReportError(f"-o {args.output}: that is a report to merge; write elsewhere")
        if args.output.is_dir() or not args.output.parent.is_dir():
            where = "a folder" if args.output.is_dir() else "in no existing folder"
            raise ReportError(f"-o {args.output}: {where}; give a file path")


def _goldens_folder(given: Path, merged: Merged) -> Path:
    """--goldens-dir resolved: it must exist and hold some module's goldens folder as the
    reports name it (from another directory, none would be judged and all look fine)."""
    folder = given.resolve()
    named = sorted({_relative_name(m.folder) for m in merged.modules.values()})
    inside = [m for m in merged.modules.values() if m.folder.resolve().is_relative_to(folder)]
    if folder.is_dir() and inside:
        return folder
    problem = "no such folder here" if not folder.is_dir() else "holds no module's goldens folder"
    raise ReportError(
        f"--goldens-dir {given}: {problem} ({Path.cwd()}); the reports' goldens folders, "
        f"relative to their rootdir: {_listed(named)}; run the merge in the suite's rootdir"
    )


def _pieces(merged: Merged, verbosity: int) -> list[str]:
    """What the reports say of their tests beyond the records: reruns, tests run in none."""
    lines = []
    for (earlier, kept), tests in merged.replaced.items():
        lines.append(
            f"run in several reports: {counted(len(tests), 'test')} of {earlier} run again in "
            f"{kept} (kept: the newer): {_listed(tests, verbosity)}"
        )
    if merged.same:
        lines.append(f"{counted(merged.same, 'test')} in several reports with the same records")
    if merged.unrun:
        lines.append(
            f"{counted(len(merged.unrun), 'test')} collected ran in no report (a missing "
            f"shard?): {_listed(merged.unrun, verbosity)}"
        )
    return lines


def _unused(merged: Merged, folder: Path, root: Path, width: int) -> list[str]:
    """The unused goldens under `folder`, after what was judged and what was not."""
    modules = {
        name: module
        for name, module in merged.modules.items()
        if module.folder.resolve().is_relative_to(folder)
    }
    used = {str((root / path).resolve()) for path in merged.used}
    for module in modules.values():
        module.folder = module.folder.resolve()
    unused, not_judged = unused_goldens(modules, merged.passed, used)
    judged = counted(len(modules) - len(not_judged), "module")
    print(f"goldens under {_shown(str(folder), root)}: {judged} judged, unused {len(unused)}")
    if not_judged:
        text = (
            f"  not judged ({len(not_judged)}: a test of theirs failed, skipped, xfailed or "
            f"ran in no report): {_listed(sorted(not_judged))}"
        )
        print("\n".join(wrap(text, width)))
    known = {module.folder for module in merged.modules.values()}
    holders = {folder, *(p for p in folder.rglob("*") if p.is_dir())}
    orphans = sorted(p for p in holders - known if any(iter_goldens(p)))
    for orphan in orphans:  # named, never pruned: the reports tell nothing of them
        text = (
            f"  goldens of no module in the reports (a renamed or deleted module?): "
            f"{_shown(str(orphan), root)}"
        )
        print("\n".join(wrap(text, width)))
    return sorted(unused)


def _listed(names: list[str], verbosity: int = 0) -> str:
    shown = names if verbosity > 0 else names[:_SHOWN]
    more = f" (+{len(names) - len(shown)} more)" if len(names) > len(shown) else ""
    return ", ".join(shown) + more


def _relative_name(path: Path) -> str:
    try:
        return path.relative_to(Path.cwd()).as_posix()
    except ValueError:
        return str(path)


def _shown(path: str, root: Path) -> str:
    try:
        return str(Path(path).relative_to(root))
    except ValueError:
        return path

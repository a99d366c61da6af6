"""The `trtcompare` console script: inspect and diff saved outputs from the shell."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from .compare import compare_outputs
from .errors import TrtCompareError
from .report import num
from .tolerance import CHECKS, RULES


class CliError(TrtCompareError):
    """A file the command line named cannot be used."""


def load_outputs(path: str) -> dict[str, np.ndarray]:
    """Outputs from an .npz (name -> array) or .npy (one array named 'output') file."""
    file = Path(path)
    if not file.is_file():
        raise CliError(f"{path}: no such file")
    try:
        if file.suffix == ".npy":
            return {"output": np.load(file, allow_pickle=False)}
        with np.load(file, allow_pickle=False) as archive:
            return {name: archive[name] for name in archive.files}
    except (OSError, ValueError, EOFError) as exc:
        raise CliError(f"{path}: not a readable .npz/.npy file ({exc})") from None


def _show(args: argparse.Namespace) -> int:
    for name, array in load_outputs(args.file).items():
        line = f"{name}: {array.dtype} {tuple(array.shape)}"
        if array.size and array.dtype.kind in "biuf":
            values = array.astype(np.float64)
            line += f"  min {num(float(values.min()))}  max {num(float(values.max()))}"
            line += f"  mean {num(float(values.mean()))}"
        print(line)
    return 0


def _diff(args: argparse.Namespace) -> int:
    fields = {
        key: value
        for key, value in (
            ("atol", args.atol),
            ("rtol", args.rtol),
            ("check", args.check_error_stat),
            ("rule", args.rule),
        )
        if value is not None
    }
    result = compare_outputs(load_outputs(args.a), load_outputs(args.b), **fields)
    print(result.report(verbosity=args.verbose))
    return 0 if result.passed else 1


def _not_yet(args: argparse.Namespace) -> int:
    print(f"trtcompare {args.command}: not yet available in this version", file=sys.stderr)
    return 2


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="trtcompare", description="Inspect and compare saved model outputs."
    )
    commands = parser.add_subparsers(dest="command", required=True)
    show = commands.add_parser("show", help="list the outputs of an .npz/.npy file")
    show.add_argument("file")
    show.set_defaults(run=_show)
    diff = commands.add_parser(
        "diff", help="compare outputs A (actual) with B (expected); exit 1 on mismatch"
    )
    diff.add_argument("a", help="actual outputs (.npz or .npy)")
    diff.add_argument("b", help="expected outputs (.npz or .npy), the reference")
    diff.add_argument("--atol", type=float)
    diff.add_argument("--rtol", type=float)
    diff.add_argument("--check-error-stat", choices=[c for c in CHECKS if c != "indices"])
    diff.add_argument("--rule", choices=RULES)
    diff.add_argument("-v", "--verbose", action="count", default=0)
    diff.set_defaults(run=_diff)
    for name in ("import-polygraphy", "export-polygraphy"):
        sub = commands.add_parser(name, help="(not yet available)")
        sub.set_defaults(run=_not_yet)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.run(args))
    except TrtCompareError as exc:
        print(f"trtcompare: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())

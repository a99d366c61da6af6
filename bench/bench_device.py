"""The device benchmark of issue 36: ours against torch.testing and a plain-torch full report.

Run on a CUDA machine: python bench/bench_device.py [--device cuda] [--sizes 16M,64M]
[--rounds 3]. On the CPU, small sizes are a smoke test (tests/test_bench_device.py runs
`--device cpu --sizes 64K --rounds 1` in CI).

On one device, for two float32 tensors per data shape (identical, noise, 100 outliers, all
failing) and size, best of the rounds:
- ours: `compare_outputs(actual, expected)` at atol = rtol = 1e-3, its report text built
  (a failing output's full report), by the torch path on the tensors' device (on the CPU
  through `TUNING.torch`; `--engine numpy` measures the numpy path there instead).
- assert_close: `torch.testing.assert_close` at the same tolerances (its thin message).
- plain report: the figures of our report in plain torch on the device. They are float64
  errors, Polygraphy's rule, the fail count, max / argmax, mean, median and p99, the
  decade histogram, the 10 worst and the cosine, with only scalars coming to the host.
Extra device memory is the peak allocated during a call over what the inputs hold (CUDA
only). Goals on a CUDA GPU (issue 36): identical outputs <= 2x assert_close (the identical
rows); a full report <= 2x the plain report (the 100-outlier rows, which fail and so build
ours in full; on passing data ours builds a one-line report); extra device memory <= 1x
the inputs. The all-failing rows (every element off by about 0.01: dense errors, the
report's order statistics over all of them) are the adversarial case for time and memory;
`--torch-kept N` sets how many non-zero errors the torch path keeps before it reads them
again (`TUNING.torch_kept`). One warm-up call of each contestant precedes the timed rounds.
"""

from __future__ import annotations

import argparse
import math
import time
from collections.abc import Callable
from typing import Any

ATOL = RTOL = 1e-3
KINDS = ("identical", "noise", "100 outliers", "all failing")
EPS = 2.220446049250313e-16  # float64 eps: Polygraphy's stand-in for expected == 0


def parse_sizes(text: str) -> list[tuple[str, int]]:
    """'16M,64M' -> [('16M', 16777216), ('64M', 67108864)] (K and M are powers of 2)."""
    units = {"K": 1 << 10, "M": 1 << 20}
    found = []
    for part in text.split(","):
        part = part.strip().upper()
        digits, unit = (part[:-1], units[part[-1]]) if part[-1:] in units else (part, 1)
        if not digits.isascii() or not digits.isdigit() or int(digits) < 1:
            raise argparse.ArgumentTypeError(f"{part!r}: a whole number of elements, 16M or 64K")
        found.append((part, int(digits) * unit))
    return found


def kept_type(text: str) -> int:
    if not text.isdigit():
        raise argparse.ArgumentTypeError(f"{text!r}: a count of errors, at least 0")
    return int(text)


def rounds_type(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: at least 1")
    return int(text)


def data(torch: Any, kind: str, size: int, device: str) -> tuple[Any, Any]:
    generator = torch.Generator(device="cpu").manual_seed(0)
    expected = torch.randn(size, generator=generator).to(device)
    if kind == "identical":
        return expected.clone(), expected
    if kind in ("noise", "all failing"):
        noise = torch.randn(size, generator=generator).to(device) * 1e-4
        return expected + noise + (0.01 if kind == "all failing" else 0.0), expected
    actual = expected.clone()
    where = torch.randint(0, size, (100,), generator=generator).to(device)
    actual[where] += 1.0  # 100 outliers
    return actual, expected


def ours(actual: Any, expected: Any) -> Any:
    from pytest_trtcompare import compare_outputs

    result = compare_outputs({"y": actual}, {"y": expected}, atol=ATOL, rtol=RTOL)
    return result.report()


def assert_close(actual: Any, expected: Any) -> Any:
    import torch

    try:
        torch.testing.assert_close(actual, expected, atol=ATOL, rtol=RTOL)
    except AssertionError as exc:
        return str(exc)
    return ""


def plain_report(actual: Any, expected: Any) -> dict[str, Any]:
    """Our report's figures in plain torch, on the tensors' device."""
    import torch

    a, e = actual.reshape(-1).double(), expected.reshape(-1).double()
    diff = (a - e).abs()
    rel = diff / torch.where(e == 0, torch.full_like(e, EPS), e.abs())
    failing = (diff > ATOL) & (rel > RTOL)
    worst, where = torch.topk(diff, min(10, diff.numel()))
    biggest, at = diff.max(0)
    n = diff.numel()
    positive = diff[diff > 0]
    decades = (
        torch.histc(torch.log10(positive), bins=20, min=-16, max=4) if positive.numel() else None
    )
    cosine = (a @ e) / (a.norm() * e.norm())
    return {
        "failing": int(failing.sum()),
        "max": float(biggest),
        "argmax": int(at),
        "mean": float(diff.mean()),
        "median": float(diff.kthvalue(max(1, (n + 1) // 2)).values),
        "p99": float(diff.kthvalue(max(1, math.ceil(0.99 * n))).values),
        "histogram": None if decades is None else decades.tolist(),
        "worst": list(zip(where.tolist(), worst.tolist(), strict=True)),
        "cosine": float(cosine),
    }


def timed(torch: Any, device: str, call: Callable[[], Any], rounds: int) -> tuple[float, int]:
    """Best seconds of `rounds` calls, and the peak extra device memory (bytes; CUDA)."""
    call()  # warm-up: imports, kernels, caches
    best, extra = math.inf, 0
    for _ in range(rounds):
        if device.startswith("cuda"):
            torch.cuda.synchronize()
            before = torch.cuda.memory_allocated()
            torch.cuda.reset_peak_memory_stats()
        start = time.perf_counter()
        call()
        if device.startswith("cuda"):
            torch.cuda.synchronize()
            extra = max(extra, torch.cuda.max_memory_allocated() - before)
        best = min(best, time.perf_counter() - start)
    return best, extra


def main(argv: list[str] | None = None) -> list[dict[str, Any]]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda", help="cuda, cuda:N or cpu")
    parser.add_argument(
        "--sizes", type=parse_sizes, default="16M,64M", help="elements, e.g. 64K,16M (16M,64M)"
    )
    parser.add_argument(
        "--rounds", type=rounds_type, default=3, help="timed calls, the best kept (3)"
    )
    parser.add_argument(
        "--engine",
        choices=("torch", "numpy"),
        default="torch",
        help="ours on CPU tensors: the torch path (default) or the numpy path",
    )
    parser.add_argument(
        "--torch-kept",
        type=kept_type,
        default=None,
        help="non-zero errors the torch path keeps for the order statistics (TUNING.torch_kept)",
    )
    args = parser.parse_args(argv)
    import torch

    from pytest_trtcompare.engine.tuning import TUNING

    device = args.device
    try:
        on = torch.device(device)
    except RuntimeError as exc:
        parser.error(f"--device {device}: {exc}")
    if on.type == "cuda" and not torch.cuda.is_available():
        parser.error(f"--device {device}: torch {torch.__version__} sees no CUDA device")
    rows = []
    cuda = on.type == "cuda"
    if cuda and args.engine == "numpy":
        parser.error("--engine numpy: CUDA tensors are compared by the torch path")
    if args.torch_kept is not None and args.engine == "numpy":
        parser.error("--torch-kept: the numpy path keeps no errors on a device (--engine torch)")
    before = TUNING.torch, TUNING.torch_kept
    TUNING.torch = args.engine == "torch"
    if args.torch_kept is not None:
        TUNING.torch_kept = args.torch_kept
    try:
        return _table(torch, device, on, args, rows)
    finally:
        TUNING.torch, TUNING.torch_kept = before


def _table(torch: Any, device: str, on: Any, args: argparse.Namespace, rows: list) -> list:
    from pytest_trtcompare.engine.tuning import TUNING

    cuda = on.type == "cuda"
    card = torch.cuda.get_device_name(on) if cuda else "CPU"
    print(
        f"device {device} ({card}), torch {torch.__version__}, best of {args.rounds}, "
        f"ours by the {args.engine} path"
        + (f", keeping up to {TUNING.torch_kept:,} errors" if args.engine == "torch" else "")
        + "; plain report: our report's figures in plain torch"
    )
    print(
        "| data | ours s | assert_close s | plain report s | ours / assert_close | "
        "ours / plain report | extra device memory / inputs: ours, assert_close, plain |"
        "\n|---|---:|---:|---:|---:|---:|---:|"
    )
    for size_text, size in args.sizes:
        for kind in KINDS:
            actual, expected = data(torch, kind, size, device)
            inputs = 2 * actual.numel() * actual.element_size()
            row: dict[str, Any] = {"data": f"{size_text} {kind}"}
            for name, call in (
                ("ours", ours),
                ("assert_close", assert_close),
                ("plain report", plain_report),
            ):
                pair = (actual, expected)
                seconds, extra = timed(torch, device, lambda c=call, p=pair: c(*p), args.rounds)
                row[name] = seconds
                row[f"{name} memory"] = extra / inputs
            rows.append(row)
            memory = "n/a (CPU)"
            if cuda:
                names = ("ours", "assert_close", "plain report")
                memory = ", ".join(f"{row[f'{name} memory']:.2f}x" for name in names)
            print(
                f"| {row['data']} | {row['ours']:.4f} | {row['assert_close']:.4f} | "
                f"{row['plain report']:.4f} | {row['ours'] / row['assert_close']:.2f}x | "
                f"{row['ours'] / row['plain report']:.2f}x | {memory} |"
            )
    return rows


if __name__ == "__main__":
    main()

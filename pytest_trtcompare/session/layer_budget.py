"""The memory budget of a per-layer comparison (`outputs="all"`, --trt-layer-budget): what it
takes, what it is by default, and the groups of layers it lets a comparison fetch at once.

A budget is bytes (`2GB`, `512MiB`, `1048576`) or a fraction of the free memory (`0.25`);
the default is DEFAULT_FRACTION of it. Free memory is the host's (/proc/meminfo's
MemAvailable, else os.sysconf), and the least free memory of the CUDA devices the runners
hold tensors on (Runner.free_device_bytes: torch.cuda.mem_get_info), where one does. A
group's bytes are its tensors on both sides (target and reference), so that what is held at
once stays under the budget.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

#: The default budget: this fraction of the free memory when the comparison starts.
DEFAULT_FRACTION = 0.25
#: What --trt-layer-budget, ini trtcompare_layer_budget and layer_budget= take.
TAKES = (
    "a size such as 2GB, 512MiB or 1048576 (bytes; no space before the unit), or a fraction "
    "of the free memory in (0, 1] such as 0.25"
)
_UNITS = {
    "": 1,
    "b": 1,
    "kb": 10**3,
    "mb": 10**6,
    "gb": 10**9,
    "tb": 10**12,
    "kib": 2**10,
    "mib": 2**20,
    "gib": 2**30,
    "tib": 2**40,
}
_SIZE = re.compile(r"^([0-9]+(?:\.[0-9]*)?|\.[0-9]+)([a-z]*)$", re.ASCII)


@dataclass(frozen=True)
class LayerBudget:
    """Bytes, or a fraction of the free memory (exactly one of them)."""

    nbytes: int | None = None
    fraction: float | None = None

    def __str__(self) -> str:
        if self.nbytes is not None:
            return size_text(self.nbytes)
        return f"{self.fraction:g} of the free memory"


def parse_layer_budget(value: Any) -> LayerBudget:
    """A budget from its text (or a marker's number: an int is bytes, a float a fraction);
    ValueError saying what it takes."""
    if isinstance(value, LayerBudget):
        return value
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise ValueError(f"got {value!r} ({type(value).__name__}); it takes {TAKES}")
    text = str(value).strip().lower()
    match = _SIZE.match(text)
    if match is None:
        spaced = re.match(r"^[0-9.]+\s+[a-z]+$", text)
        hint = "; write the size without a space (2GB)" if spaced else ""
        sign = "; a budget is more than 0" if text.startswith("-") else ""
        raise ValueError(f"{value!r} is not a budget{sign}{hint}: it takes {TAKES}")
    number, unit = match.groups()
    if unit not in _UNITS:
        raise ValueError(f"{value!r}: unknown unit {unit!r}; it takes {TAKES}")
    is_fraction = not unit and ("." in number or isinstance(value, float))
    if is_fraction:
        fraction = float(number)
        if not 0 < fraction <= 1:
            raise ValueError(
                f"{value!r}: a fraction of the free memory is in (0, 1]; a size takes a unit "
                f"or is whole bytes; it takes {TAKES}"
            )
        return LayerBudget(fraction=fraction)
    nbytes = int(float(number) * _UNITS[unit])
    if nbytes <= 0:
        raise ValueError(f"{value!r}: a budget is more than 0 bytes; it takes {TAKES}")
    return LayerBudget(nbytes=nbytes)


def size_text(nbytes: float) -> str:
    """'512.0 MiB'."""
    for unit in ("B", "KiB", "MiB", "GiB"):
        if nbytes < 1024 or unit == "GiB":
            return f"{nbytes:.0f} {unit}" if unit == "B" else f"{nbytes:.1f} {unit}"
        nbytes /= 1024
    raise AssertionError("unreachable")


def host_free_bytes() -> int | None:
    """The host's available memory: /proc/meminfo's MemAvailable on Linux, else
    os.sysconf's available pages; None where neither says."""
    try:
        with open("/proc/meminfo", encoding="ascii") as meminfo:
            for line in meminfo:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return int(os.sysconf("SC_AVPHYS_PAGES")) * int(os.sysconf("SC_PAGE_SIZE"))
    except (ValueError, OSError, AttributeError):
        return None


def device_free_bytes(runners: Sequence[Any]) -> int | None:
    """The least free memory of the devices where these runners hold compared tensors
    (Runner.free_device_bytes: a torch runner's CUDA device), None when none does."""
    found = [runner.free_device_bytes() for runner in runners]
    known = [free for free in found if free is not None]
    return min(known) if known else None


def budget_bytes(budget: LayerBudget | None, runners: Sequence[Any] = ()) -> int:
    """The budget in bytes now: its bytes, or its fraction (default DEFAULT_FRACTION) of the
    least free memory of the host and the runners' CUDA devices."""
    budget = budget or LayerBudget(fraction=DEFAULT_FRACTION)
    if budget.nbytes is not None:
        return budget.nbytes
    free = [f for f in (host_free_bytes(), device_free_bytes(runners)) if f is not None]
    if not free:  # nothing says: a budget that a small machine holds
        free = [4 * 2**30]
    return max(1, int(min(free) * (budget.fraction or DEFAULT_FRACTION)))


def plan_groups(
    names: Sequence[str], sizes: Mapping[str, int | None], budget: int
) -> tuple[list[list[str]], list[str]]:
    """`names` in order, cut into groups whose `sizes` (bytes of a tensor on both sides) sum
    to at most `budget`; a tensor of unknown size, or larger than the budget, is a group of
    its own. Also the names larger than the budget (a note says them)."""
    groups: list[list[str]] = []
    over: list[str] = []
    current: list[str] = []
    held = 0
    for name in names:
        size = sizes.get(name)
        if size is None or size > budget:
            if size is not None:
                over.append(name)
            if current:
                groups.append(current)
            groups.append([name])
            current, held = [], 0
            continue
        if current and held + size > budget:
            groups.append(current)
            current, held = [], 0
        current.append(name)
        held += size
    if current:
        groups.append(current)
    return groups, over

"""`--trt-device`: which device the torch and TensorRT runners use, one GPU per xdist worker.

`auto` is a CUDA device where one is visible, else the CPU; `cuda` is a CUDA device; both
give xdist worker gwK the visible device K mod count (without xdist, device 0), so `-n 4`
on four GPUs runs one worker per GPU. `cuda:N` is that device for every worker, `cpu` the
CPU. Visible means after `CUDA_VISIBLE_DEVICES`, to the runner's framework: torch counts the
GPUs the torch runner can use (none for a CPU build of torch), cuda-bindings those TensorRT
can; with `CUDA_VISIBLE_DEVICES=2,3`, worker gw1 gets `cuda:1`, the physical GPU 3.
"""

from __future__ import annotations

import re

from ..errors import RunnerOptionError

CHOICES = ("auto", "cpu", "cuda", "cuda:N")
_CUDA_INDEX = re.compile(r"^cuda:(0|[1-9][0-9]{0,3})$", re.ASCII)  # as torch spells it


def parse_device(text: str, where: str) -> str:
    """The choice, checked: 'auto', 'cpu', 'cuda' or 'cuda:N' (any case, spaces trimmed)."""
    choice = text.strip().lower()
    if choice in ("auto", "cpu", "cuda") or _CUDA_INDEX.match(choice):
        return choice
    raise RunnerOptionError(f"{where}: {text!r} is not a device; takes {' | '.join(CHOICES)}")


def device_for(choice: str, worker: str | None, count: int) -> str:
    """The device of this process: `worker` is xdist's id ('gw3', None without xdist),
    `count` the CUDA devices visible to the runner's framework. `auto` without any is the
    CPU; `cuda` without any is `cuda:0`, which the runners then skip naming it."""
    if choice == "cpu" or _CUDA_INDEX.match(choice):
        return choice
    if count == 0:
        return "cpu" if choice == "auto" else "cuda:0"
    index = int(worker[2:]) % count if worker and worker[2:].isdigit() else 0
    return f"cuda:{index}"

"""--trt-device and ini trtcompare_device: where the torch and TensorRT runners run; `auto`
gives each pytest-xdist worker its own GPU (session/devices.py)."""

from __future__ import annotations

from typing import Any

import pytest

from ..errors import RunnerOptionError
from ..session.devices import CHOICES, parse_device

INI_DEFAULTS: dict[str, Any] = {"trtcompare_device": ""}


def add_options(group: Any, parser: pytest.Parser) -> None:
    group.addoption(
        "--trt-device",
        dest="trt_device",
        metavar="|".join(CHOICES),
        help="device of the torch and TensorRT runners: auto (a CUDA device where one is "
        "visible, else the CPU), cpu, cuda or cuda:N; auto and cuda give xdist worker gwK "
        "the visible GPU K mod count (ini: trtcompare_device)",
    )
    parser.addini(
        "trtcompare_device", "default of --trt-device", default=INI_DEFAULTS["trtcompare_device"]
    )


def device_setting(config: pytest.Config) -> str | None:
    """The choice, checked at the start (a usage error naming the option or ini key);
    None when neither is set: each runner's own default (torch: cpu, trt: cuda:0)."""
    given = config.getoption("trt_device")
    text = given or str(config.getini("trtcompare_device")).strip()
    if not text:
        return None
    where = f"--trt-device={given}" if given else "ini trtcompare_device"
    try:
        return parse_device(text, where)
    except RunnerOptionError as exc:
        raise pytest.UsageError(str(exc)) from None

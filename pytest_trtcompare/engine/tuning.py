"""The engine's accelerators and sizes, in one place: what tests turn off or shrink.

Every figure is the same with any of these: the float32 screen, the bit-equality check,
the order statistics' windows and the torch path only make a comparison faster, and chunk
sizes only bound its memory. Tests set them (`monkeypatch.setattr(TUNING, "screen", False)`)
to compare each accelerated path with the plain float64 one, and to run many chunks on
small data.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any


@dataclass
class Tuning:
    chunk_elements: int = 1 << 17  # elements per chunk: memory is a few chunks of float64
    screen: bool = True  # narrow floats computed in float32 first (`screen`)
    #: outputs smaller than this go to float64 at once: for them the screen's setup and the
    #: maxima's second look cost more than float32 saves (a small test's fixed cost)
    screen_min: int = 1 << 12
    equality: bool = True  # bit-for-bit equal chunks skip the arithmetic (`chunks.Equality`)
    window_min: float = 1 << 18  # outputs this large take the windows (`quantiles`)
    sample: int = 1 << 17  # elements sampled to place the windows
    window_cap: int = 1 << 16  # a window keeps at most max(this, count / 16) values
    min_collect: int = 1 << 20  # the exact selection collects a bucket this small
    #: CPU torch tensors take the torch path (`tensors`), as CUDA tensors always do, and a
    #: CPU torch runner returns tensors, as a CUDA one always does; off, numpy compares them
    #: over the same memory (zero-copy, and faster on a CPU)
    torch: bool = False
    #: elements per chunk of the torch path: few kernel launches and host syncs per output
    torch_chunk_elements: int = 1 << 21
    #: nonzero errors (abs and rel) the torch path keeps for the order statistics; past
    #: that, it reads the errors again (`quantiles`): the device memory stays bounded
    torch_kept: int = 1 << 22
    #: the page-locked buffer that copies between a CUDA device and the host go through
    staging_bytes: int = 1 << 25

    def __setattr__(self, name: str, value: Any) -> None:
        """Only its fields, each of its own type: a switch takes True or False (a string
        "false" would be true), a size a number not below 0."""
        kinds = {field.name: field.type for field in fields(self)}
        if name not in kinds:
            raise AttributeError(f"TUNING has no {name!r}; it has {', '.join(kinds)}")
        switch = kinds[name] == "bool"
        fits = (
            isinstance(value, bool)
            if switch
            else isinstance(value, (int, float)) and not isinstance(value, bool) and value >= 0
        )
        if not fits:
            wanted = "True or False" if switch else "a number of at least 0"
            raise TypeError(f"TUNING.{name} takes {wanted}, not {value!r}")
        super().__setattr__(name, value)


TUNING = Tuning()

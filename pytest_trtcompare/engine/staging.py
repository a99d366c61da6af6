"""Copies between a CUDA device and the host (a golden to the device, an output to a host
consumer: a golden written, artifacts, an isolated worker's pipe) through one page-locked
buffer, reused and bounded."""

from __future__ import annotations

from typing import Any

from .tuning import TUNING


class Staging:
    """Copies between a CUDA device and the host through one page-locked buffer, reused and
    bounded (`TUNING.staging_bytes`): a pageable copy runs at a fraction of the bus's speed
    (H100: 1.3 GB/s, pinned 54 GB/s). Under `TUNING.torch` a CPU tensor's host copy takes
    the same steps (through an unpinned buffer), so CI runs them."""

    def __init__(self) -> None:
        self.buffer: Any = None

    def to_host(self, tensor: Any) -> Any:
        """A CPU tensor of the tensor's values, the caller's own."""
        import torch

        staged = tensor.device.type == "cuda" or (TUNING.torch and tensor.device.type == "cpu")
        if not staged or not tensor.numel():  # (MPS and others: their own copy)
            return tensor.cpu()
        host = torch.empty(tensor.shape, dtype=tensor.dtype)
        self._copy(tensor.contiguous(), host, tensor.device)
        return host

    def to_device(self, tensor: Any, device: Any) -> Any:
        """A CPU tensor's values on `device` (as they are, on the CPU)."""
        import torch

        if device.type != "cuda" or not tensor.numel():
            return tensor.to(device)
        moved = torch.empty(tensor.shape, dtype=tensor.dtype, device=device)
        self._copy(tensor.contiguous(), moved, device)
        return moved

    def _copy(self, source: Any, target: Any, device: Any) -> None:
        import torch

        source, target = _bytes(source), _bytes(target)
        cuda = device.type == "cuda"
        size = max(1, min(source.numel(), TUNING.staging_bytes))
        if self.buffer is None or self.buffer.numel() < size or self.buffer.is_pinned() != cuda:
            self.buffer = torch.empty(size, dtype=torch.uint8, pin_memory=cuda)
        sync = torch.cuda.current_stream(device).synchronize if cuda else lambda: None
        step = self.buffer.numel()
        for start in range(0, source.numel(), step):
            count = min(step, source.numel() - start)
            self.buffer[:count].copy_(source[start : start + count], non_blocking=True)
            sync()  # the buffer holds this step's bytes
            target[start : start + count].copy_(self.buffer[:count], non_blocking=True)
            sync()  # they left it: the next step may overwrite it


def _bytes(tensor: Any) -> Any:
    """A contiguous tensor's memory as a flat uint8 tensor (a view: 0-d and empty ones too)."""
    import torch

    return tensor.reshape(-1).view(torch.uint8)


STAGING = Staging()

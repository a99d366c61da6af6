"""The torch path: chunks of torch tensors made on the tensors' own device.

A CUDA tensor is compared where it is (a CPU one too under `TUNING.torch`): each chunk's
float64 errors are computed by torch on the tensor's device, as `chunks.Arithmetic` computes
numpy's, op for op, so every error is the same float64 number; the statistics
(`accumulators`, `figures`, `decades`, `quantiles`) read them through the chunk's array
namespace. Only scalars and the report's elements come to the host. There is no float32
screen here: a float64 chunk is a few element-wise kernels over memory the GPU reads at
terabytes per second.

A numpy side (a golden) goes to the tensor's device through `staging.STAGING`.
"""

from __future__ import annotations

import functools
import math
from typing import Any

import numpy as np

from .arrays import TORCH_KINDS, Kind, NamedArray, host_array, is_torch_tensor, on_host
from .chunks import EPS, ErrorChunk, max_ignoring_nan, pair_kind
from .staging import STAGING
from .tolerance import Tolerance
from .tuning import TUNING

#: Bit views by item size, for the bit-for-bit equality of two chunks.
_BITS = {1: "uint8", 2: "int16", 4: "int32", 8: "int64"}


@functools.cache
def torch_namespace() -> Any:
    """array-api-compat's namespace of torch tensors (the chunks' `xp`)."""
    import array_api_compat.torch

    return array_api_compat.torch


def chunk_elements(array: Any) -> int:
    """Elements per chunk of an array: a tensor's are fewer, larger chunks (`TUNING`)."""
    return TUNING.torch_chunk_elements if is_torch_tensor(array) else TUNING.chunk_elements


class TorchArithmetic:
    """Makes float64 ErrorChunks of torch tensor slices, on their device."""

    def __init__(self, a_kind: Kind, e_kind: Kind, tolerance: Tolerance) -> None:
        self.a_kind, self.e_kind = a_kind, e_kind
        self.pair = pair_kind(a_kind, e_kind)
        self.tol = tolerance

    def compute(self, a: Any, e: Any, start: int, ratio: bool = True) -> ErrorChunk:
        import torch

        av, ev = a.to(torch.float64), e.to(torch.float64)
        if self.pair == "float":
            d = (av - ev).abs()
        elif self.pair == "bool":
            d = (av != ev).to(torch.float64)
        else:
            d = _exact_int_absdiff(a, e)
        counts: dict[str, Any] = {}
        positions = None
        cos_a, cos_e = av, ev
        special = self.pair == "float" and d.shape[0] and not bool(torch.isfinite(d).all())
        if special:
            av, ev, d, positions, cos_a, cos_e = self._special_values(av, ev, d, start, counts)
        eabs = ev.abs()
        r = d / eabs
        eabs_eps = eabs
        if r.shape[0] and not bool(torch.isfinite(r).all()):
            # expected == 0 (or Inf, NaN) somewhere: Polygraphy's epsilon; Inf/Inf is Inf and
            # 0/NaN (NaN pairs excused by nan_equal) is 0.
            eabs_eps = torch.where(eabs == 0, EPS, eabs)
            r = d / eabs_eps
            r = torch.where(r.isnan(), torch.where(d == 0, 0.0, math.inf), r)
        margin = 0.0
        ratios = d[:0]
        if ratio:
            ratios = self._ratio(d, eabs, eabs_eps, bool(special))
            margin = max_ignoring_nan(ratios) if ratios.shape[0] else 0.0
        return ErrorChunk(
            start,
            a.shape[0],
            d,
            r,
            ratios,
            eabs,
            (cos_a, cos_e, cos_a - cos_e),
            positions=positions,
            margin=margin,
            xp=torch_namespace(),
            **counts,
        )

    def _special_values(
        self, av: Any, ev: Any, d: Any, start: int, counts: dict[str, Any]
    ) -> tuple[Any, Any, Any, Any, Any, Any]:
        """A chunk holding NaN or Inf: counts them and applies the options (as numpy's)."""
        import torch

        nan_a, nan_e, inf_a, inf_e = av.isnan(), ev.isnan(), av.isinf(), ev.isinf()
        any_inf = bool(inf_a.any() or inf_e.any())
        if self.tol.inf_equal and any_inf:
            d = torch.where(inf_a & (av == ev), 0.0, d)
        nan_pairs = self.tol.nan_equal and bool((nan_a & nan_e).any())
        if nan_pairs:
            d = torch.where(nan_a & nan_e, 0.0, d)
        nan_err = d.isnan()
        nan_errors = int(torch.count_nonzero(nan_err))
        counts.update(
            nan_errors=nan_errors,
            nan_actual=int(torch.count_nonzero(nan_a)),
            nan_expected=int(torch.count_nonzero(nan_e)),
            inf_actual=int(torch.count_nonzero(inf_a)),
            inf_expected=int(torch.count_nonzero(inf_e)),
            nan_positions_differ=not torch.equal(nan_a, nan_e),
            nan_error_positions=torch.nonzero(nan_err).reshape(-1) + start,
        )
        keep = torch.nonzero(~nan_err).reshape(-1) if nan_errors else None
        kept = (av, ev, d) if keep is None else (av[keep], ev[keep], d[keep])
        if keep is not None and not (any_inf or nan_pairs):  # kept pairs are the finite
            cos_a, cos_e = kept[0], kept[1]
        else:  # the cosine similarity sums pairs where both values are finite
            finite = ~(nan_a | nan_e | inf_a | inf_e)
            cos_a, cos_e = torch.where(finite, av, 0.0), torch.where(finite, ev, 0.0)
        return *kept, None if keep is None else keep + start, cos_a, cos_e

    def _ratio(self, d: Any, eabs: Any, eabs_eps: Any, special: bool) -> Any:
        """d / allowed error: > 1 fails, NaN for 0/0 (within tolerance), Inf for x/0."""
        import torch

        tol = self.tol
        if tol.rule == "polygraphy":
            allowed = torch.clamp_min(eabs_eps * tol.rtol, tol.atol)  # NaN stays NaN
        else:
            allowed = eabs * tol.rtol + tol.atol
        ratio = d / allowed
        if special:
            ratio = torch.where(d.isinf(), math.inf, ratio)  # Inf against a finite value
        return ratio


def _exact_int_absdiff(a: Any, e: Any) -> Any:
    """|a - e| of two integer tensors as float64, rounded once (numpy's uint64 difference).

    hi - lo = 2 ((hi >> 1) - (lo >> 1)) + ((hi & 1) - (lo & 1)), whose halves never
    overflow int64; its high 32 bits and the rest are exact float64 values, so their sum
    rounds once."""
    import torch

    a64, e64 = a.to(torch.int64), e.to(torch.int64)
    hi, lo = torch.maximum(a64, e64), torch.minimum(a64, e64)
    half = (hi >> 1) - (lo >> 1)
    odd = (hi & 1) - (lo & 1)
    high = (half >> 31).to(torch.float64) * 2.0**32
    low = ((half & (2**31 - 1)) * 2 + odd).to(torch.float64)
    return high + low


class TorchEquality:
    """`equal(a, e, start)`: a chunk of zeros when two tensor chunks hold the same bits (as
    `chunks.Equality` tells numpy's), else None."""

    def __init__(self, a_dtype: Any, e_dtype: Any, tol: Tolerance) -> None:
        import torch

        self._nan_equal, self._inf_equal = tol.nan_equal, tol.inf_equal
        self._float = a_dtype.is_floating_point
        self._view = getattr(torch, _BITS.get(a_dtype.itemsize, ""), None)
        self.enabled = a_dtype == e_dtype and TUNING.equality and self._view is not None

    def equal(self, a: Any, e: Any, start: int) -> ErrorChunk | None:
        import torch

        from .chunks import zeros

        if not self.enabled or not torch.equal(a.view(self._view), e.view(self._view)):
            return None
        nan = inf = 0
        if self._float:
            nan = int(torch.count_nonzero(a.isnan()))
            inf = int(torch.count_nonzero(a.isinf()))
            if inf and not self._inf_equal:
                return None
        empty = torch.zeros(0, dtype=torch.float64, device=a.device)
        nan_errors = 0 if self._nan_equal else nan
        return zeros(start, a.shape[0], a, nan, inf, nan_errors, empty, torch_namespace())


def non_finite(named: NamedArray) -> tuple[int, int, tuple[int, ...] | None]:
    """A float output's NaN and Inf counts and the index of the first of them, counted where
    the array is; (0, 0, None) for a finite one or another kind."""
    if named.kind != "float":
        return 0, 0, None
    array = named.array
    xp = torch_namespace() if is_torch_tensor(array) else np
    finite = xp.isfinite(array)
    if bool(xp.all(finite)):
        return 0, 0, None
    nan = int(xp.sum(xp.isnan(array)))
    bad = np.flatnonzero(~host_array(finite))
    first = tuple(int(i) for i in np.unravel_index(int(bad[0]), tuple(array.shape)))
    return nan, len(bad) - nan, first


def placed_together(actual: NamedArray, expected: NamedArray) -> tuple[NamedArray, NamedArray]:
    """Both sides of a pair where its tensor is (the actual side's, when both are tensors):
    a numpy side is copied there; a dtype the torch path does not compute takes both to the
    host."""
    on_device = [side.array for side in (actual, expected) if is_torch_tensor(side.array)]
    if not on_device:
        return actual, expected
    device = on_device[0].device
    moved = [_to_device(side, device) for side in (actual, expected)]
    if moved[0] is None or moved[1] is None:
        return on_host(actual), on_host(expected)
    return moved[0], moved[1]


def _to_device(named: NamedArray, device: Any) -> NamedArray | None:
    import torch

    array = named.array
    if is_torch_tensor(array):
        return NamedArray(array.to(device), named.dtype_name, named.kind)
    if array.dtype.kind == "V" and named.kind == "float":  # ml_dtypes: float32 holds them
        array = array.astype(np.float32)
    elif array.dtype.name not in TORCH_KINDS:
        return None
    tensor = torch.from_numpy(np.require(array, requirements="C"))  # 0-d stays 0-d
    return NamedArray(STAGING.to_device(tensor, device), named.dtype_name, named.kind)


def top_k(values: Any, k: int, axis: int) -> Any:
    """`indices.top_k_indices` of a tensor, on its device."""
    import torch

    rows = values.reshape(1) if values.ndim == 0 else values
    ranked = torch.argsort(-rows.to(torch.float64), dim=axis, stable=True)
    return ranked.narrow(axis, 0, min(k, ranked.shape[axis]))

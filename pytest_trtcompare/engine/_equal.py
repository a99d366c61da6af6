"""Recognising chunks whose two sides are bit-for-bit equal, before computing any error.

A deterministic golden check compares identical data; such a chunk has every error exactly
0, so one comparison of the raw bits (and, for floats, a look at the exponent bits for NaN
and Inf, which do not compare as equal values) replaces the whole error arithmetic. Inf
pairs are equal values where `inf_equal` excuses them; NaN pairs are too where `nan_equal`
does, and otherwise the chunk's only errors, NaN errors, as the float64 path makes them.
"""

from __future__ import annotations

from typing import Any

import numpy as np

#: (unsigned view, exponent bits): all exponent bits set means NaN or Inf.
_FLOAT_BITS: dict[str, tuple[type[np.unsignedinteger[Any]], int]] = {
    "float16": (np.uint16, 0x7C00),
    "bfloat16": (np.uint16, 0x7F80),
    "float32": (np.uint32, 0x7F800000),
    "float64": (np.uint64, 0x7FF0000000000000),
}
_UNSIGNED: dict[int, type[np.unsignedinteger[Any]]] = {
    1: np.uint8,
    2: np.uint16,
    4: np.uint32,
    8: np.uint64,
}
_PREFIX = 16  # a differing chunk usually differs at once: look there first


class EqualChunks:
    """`equal(a, e)`: whether two chunks hold the same values, bit for bit, any Inf among
    them excused by `inf_equal`; `nan_pairs` and `inf_pairs` then count NaN and Inf pairs,
    and `nan_errors` the NaN pairs that `nan_equal` does not excuse (errors of NaN)."""

    def __init__(
        self,
        a_dtype: np.dtype,
        e_dtype: np.dtype,
        chunk_elements: int,
        nan_equal: bool = False,
        inf_equal: bool = False,
    ) -> None:
        self.enabled = False
        self.nan_pairs = self.inf_pairs = 0
        self._nan_equal, self._inf_equal = nan_equal, inf_equal
        self._mask: np.unsignedinteger[Any] | None = None
        if a_dtype != e_dtype:
            return
        if a_dtype.kind in "biu" and a_dtype.itemsize in _UNSIGNED:
            self._view = _UNSIGNED[a_dtype.itemsize]
        elif a_dtype.name in _FLOAT_BITS:
            self._view, mask = _FLOAT_BITS[a_dtype.name]
            self._mask = self._view(mask)
            # the sign bit cleared: a magnitude above the exponent bits is NaN, equal Inf
            self._magnitude = self._view((1 << (8 * a_dtype.itemsize - 1)) - 1)
        else:
            return
        self.enabled = True
        self._flags = np.empty(chunk_elements, dtype=np.bool_)
        self._bits = np.empty(chunk_elements, dtype=self._view)

    def equal(self, a: np.ndarray, e: np.ndarray) -> bool:
        n = a.shape[0]
        self.nan_pairs = self.inf_pairs = 0
        av, ev = a.view(self._view), e.view(self._view)
        if np.not_equal(av[:_PREFIX], ev[:_PREFIX]).any():
            return False
        flags = self._flags[:n]
        if np.not_equal(av, ev, out=flags).any():
            return False
        if self._mask is not None:
            bits = np.bitwise_and(av, self._mask, out=self._bits[:n])
            if np.equal(bits, self._mask, out=flags).any():
                return self._excused(av, int(np.count_nonzero(flags)))
        return True

    @property
    def nan_errors(self) -> int:
        """NaN pairs of the last equal chunk that are errors (no `nan_equal`)."""
        return 0 if self._nan_equal else self.nan_pairs

    def _excused(self, bits: np.ndarray, special: int) -> bool:
        """Whether the Inf pairs among the NaN and Inf pairs (`special`) are excused."""
        magnitude = np.bitwise_and(bits, self._magnitude, out=self._bits[: bits.shape[0]])
        nan = int(np.count_nonzero(magnitude > self._mask))
        inf = special - nan
        if inf and not self._inf_equal:
            return False
        self.nan_pairs, self.inf_pairs = nan, inf
        return True

"""Polygraphy's `--compare indices` and `--postprocess top-K`, vectorised.

Outputs are treated as batches of rows along the last axis. An element i of an actual row is
in place when the expected row holds the same value at i, or holds it (first occurrence)
within `index_tolerance` positions; the last `index_tolerance` elements of each row are not
checked (Polygraphy's rule, so Top-(K + tol) compensates).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from .arrays import is_torch_tensor
from .tensors import top_k

_ROW_BLOCK_ELEMENTS = 1 << 22  # bounds the (rows, K, K) equality table per block


@dataclass(frozen=True)
class IndexMismatch:
    """One row whose indices moved too far."""

    row: tuple[int, ...]
    actual: tuple[object, ...]
    expected: tuple[object, ...]
    needed: int  # smallest index tolerance at which this row passes


@dataclass(frozen=True)
class IndexStats:
    rows: int
    failing_rows: int
    required_index_tolerance: int
    examples: tuple[IndexMismatch, ...]


def top_k_indices(values: Any, k: int, axis: int = -1) -> Any:
    """Indices of the k largest values along an axis, largest first, stable for ties (NaN
    last); a tensor's on its device."""
    if is_torch_tensor(values):
        return top_k(values, k, axis)
    values = np.asarray(values)
    if values.ndim == 0:
        values = values.reshape(1)
    order = np.argsort(-values.astype(np.float64), axis=axis, kind="stable")
    k = min(k, order.shape[axis])
    return np.take(order, np.arange(k), axis=axis)


def _row_needs(actual: np.ndarray, expected: np.ndarray) -> np.ndarray:
    """Smallest passing index tolerance per row, for 2-D (rows, K) blocks."""
    rows, k = actual.shape
    if k == 0:
        return np.zeros(rows, dtype=np.int64)
    same = actual[:, :, None] == expected[:, None, :]  # (rows, K actual pos, K expected pos)
    found = same.any(axis=2)
    first = same.argmax(axis=2)
    positions = np.arange(k)
    in_place = actual == expected
    displacement = np.where(in_place, 0, np.abs(first - positions))
    displacement = np.where(found | in_place, displacement, k)  # not found: only skipping helps
    need_per_element = np.minimum(k - positions, displacement)
    return np.asarray(need_per_element.max(axis=1))


def compare_indices(
    actual: np.ndarray, expected: np.ndarray, index_tolerance: int, max_examples: int = 5
) -> IndexStats:
    """Row-wise index comparison of two equal-shape arrays."""
    if actual.ndim == 0:
        actual, expected = actual.reshape(1), expected.reshape(1)
    batch_shape = actual.shape[:-1]
    k = actual.shape[-1]
    a2 = actual.reshape(-1, k) if k else actual.reshape(int(np.prod(batch_shape)), 0)
    e2 = expected.reshape(a2.shape)
    block = max(1, _ROW_BLOCK_ELEMENTS // max(1, k * k))
    needs = np.concatenate(
        [_row_needs(a2[i : i + block], e2[i : i + block]) for i in range(0, a2.shape[0], block)]
        or [np.zeros(0, dtype=np.int64)]
    )
    failing = np.flatnonzero(needs > index_tolerance)
    examples = tuple(
        IndexMismatch(
            row=tuple(int(x) for x in np.unravel_index(int(i), batch_shape)) if batch_shape else (),
            actual=tuple(a2[i].tolist()),
            expected=tuple(e2[i].tolist()),
            needed=int(needs[i]),
        )
        for i in failing[:max_examples]
    )
    return IndexStats(
        rows=int(a2.shape[0]),
        failing_rows=int(failing.size),
        required_index_tolerance=int(needs.max()) if needs.size else 0,
        examples=examples,
    )

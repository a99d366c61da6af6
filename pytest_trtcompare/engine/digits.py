"""Numbers as the report prints them: data values in the shortest text that reads back to the
same value of their dtype, figures compared with a bound in enough digits to compare with it
as they do, tolerances exactly."""

from __future__ import annotations

import math

import numpy as np

from .arrays import dtype_from_name

_FLOAT64 = np.dtype(np.float64)


def num(value: float | int | bool | None, digits: int = 4) -> str:
    """Compact number for a summary (a mean, a quantile): 0.0412, 2.1e-05, 37, nan, inf."""
    if value is None:
        return "n/a"
    if isinstance(value, (bool, np.bool_)):
        return str(bool(value))
    if isinstance(value, (int, np.integer)):
        return str(int(value))
    if math.isnan(value):
        return "nan"
    if math.isinf(value):
        return "inf" if value > 0 else "-inf"
    if value == int(value) and abs(value) < 10**digits:  # past that, 3.288e+12
        return str(int(value)) if digits < 16 else repr(value)
    return f"{value:.{digits}g}"


def exact(value: float | int | None) -> str:
    """A tolerance or a threshold as given: float64's shortest text that reads back to it
    (1e-05, 0.00012345, 3), never rounded."""
    if value is None:
        return "n/a"
    if isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_)):
        return str(int(value))
    return _trimmed(repr(float(value)))


def shortest(value: float | int | bool | None, dtype: np.dtype | str | None = None) -> str:
    """A data value in the fewest significant digits that read back to the same value of
    `dtype` (float16 up to 5, float32 up to 9, float64 up to 17; bfloat16 and float8 of
    ml_dtypes alike): two different values never print the same. Integers and bools as
    they are; no dtype is float64."""
    if value is None or isinstance(value, (bool, np.bool_, int, np.integer)):
        return num(value)
    number = float(value)
    if not math.isfinite(number):
        return num(number)
    if number == int(number) and abs(number) < 1e16:
        return str(int(number))  # exact, and shorter than 4.5e+02
    kind = _as_dtype(dtype)
    if kind == _FLOAT64 or kind.kind not in "fV":
        return _trimmed(repr(number))
    for digits in range(1, 18):
        text = f"{number:.{digits}g}"
        if _rounded(float(text), kind) == number:
            return _trimmed(text)
    return _trimmed(repr(number))


def pair_dtype(actual: str, expected: str) -> np.dtype:
    """The dtype to print an (actual, expected) pair of values in: their own when they are
    the same, else one that holds both (float16 beside float32: float32), so that a float16
    0.0999755859375 and a float32 0.1 do not both print 0.1."""
    first, second = _as_dtype(actual), _as_dtype(expected)
    if first == second:
        return first
    narrow = all(d.kind in "fVb" or (d.kind in "iu" and d.itemsize <= 2) for d in (first, second))
    if narrow and max(first.itemsize, second.itemsize) <= 4:
        return np.dtype(np.float32)
    return _FLOAT64


def against(value: float | None, bound: float | None, digits: int = 4) -> str:
    """`num(value, digits)`, with digits added until the text compares with `bound` as the
    value does: an error of 1.00001e-4 over an atol of 1e-4 never prints 0.0001."""
    text = num(value, digits)
    if value is None or bound is None or not math.isfinite(value) or math.isnan(bound):
        return text
    while _side(float(text), bound) != _side(value, bound) and digits < 17:
        digits += 1
        text = _trimmed(f"{value:.{digits}g}")
    return text


def _side(value: float, bound: float) -> int:
    return (value > bound) - (value < bound)


def _as_dtype(dtype: np.dtype | str | None) -> np.dtype:
    if dtype is None:
        return _FLOAT64
    if isinstance(dtype, str):
        try:
            return dtype_from_name(dtype)
        except ValueError:
            return _FLOAT64
    return np.dtype(dtype)


def _rounded(number: float, dtype: np.dtype) -> float:
    """`number` rounded to `dtype` (inf past its range), as a float."""
    with np.errstate(all="ignore"):
        return float(np.array(number, dtype=np.float64).astype(dtype))


def _trimmed(text: str) -> str:
    """'37.0' -> '37' (repr's float64), keeping '1e+16' and '0.5' as they are."""
    return text[:-2] if text.endswith(".0") else text

"""Turning what users hand us (numpy, torch, ml_dtypes, lists) into numeric arrays: numpy's,
or torch tensors compared where they are."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from ..errors import InvalidOutputError
from .staging import STAGING
from .tuning import TUNING

Kind = Literal["bool", "int", "uint", "float"]

#: Name used for a bare array passed where a mapping of outputs was expected.
SINGLE_OUTPUT_NAME = "output"


@dataclass(frozen=True)
class NamedArray:
    """One output: its numeric array and the dtype name users will recognise."""

    array: Any  # np.ndarray; a torch tensor compared on its device (`keep_device`)
    dtype_name: str
    kind: Kind


def _ml_dtypes_kind(dtype: np.dtype) -> Kind | None:
    """bfloat16 / float8_* / int4 ... from ml_dtypes register as numpy kind 'V'."""
    if not getattr(dtype.type, "__module__", "").startswith("ml_dtypes"):
        return None
    import ml_dtypes

    try:
        ml_dtypes.finfo(dtype)  # type: ignore[no-untyped-call]
        return "float"
    except (ValueError, TypeError):
        pass
    try:
        info = ml_dtypes.iinfo(dtype)  # type: ignore[no-untyped-call]
        return "int" if info.min < 0 else "uint"
    except (ValueError, TypeError):
        return None


def dtype_from_name(name: str) -> np.dtype:
    """numpy dtype of a name, ml_dtypes' too ('bfloat16', 'float8_e4m3fn', 'int4');
    ValueError if none."""
    if name in _ML_DTYPES_NAMES or name.startswith(("float8", "float6", "float4")):
        try:
            import ml_dtypes
        except ImportError:
            raise ValueError(f"{name} needs ml_dtypes: pip install ml_dtypes") from None
        if not hasattr(ml_dtypes, name):
            raise ValueError(f"ml_dtypes has no dtype {name!r}")
        low_precision: np.dtype = np.dtype(getattr(ml_dtypes, name))
        return low_precision
    try:
        return np.dtype(name)
    except TypeError:
        raise ValueError(f"unknown dtype {name!r}") from None


#: ml_dtypes' names that numpy does not know (numpy's own int8 etc. stay numpy's).
_ML_DTYPES_NAMES = ("bfloat16", "int1", "int2", "int4", "uint1", "uint2", "uint4")


def dtype_kind(dtype: np.dtype) -> Kind | None:
    """Numeric kind of a dtype, or None when it cannot be compared numerically."""
    if dtype.kind == "b":
        return "bool"
    if dtype.kind == "i":
        return "int"
    if dtype.kind == "u":
        return "uint"
    if dtype.kind == "f":
        return "float"
    if dtype.kind == "V":
        return _ml_dtypes_kind(dtype)
    return None


#: str(dtype) of numpy's own dtypes, by dtype: numpy builds the name anew each time (a few
#: µs, twice per output of every comparison).
_NAMES: dict[np.dtype, str] = {}


def _dtype_name(dtype: np.dtype) -> str:
    if dtype.kind not in "biuf":  # ml_dtypes' and the refused: as numpy names them
        return str(dtype)
    name = _NAMES.get(dtype)
    if name is None:
        name = _NAMES[dtype] = str(dtype)
    return name


def _from_torch(value: Any, where: str, keep: bool = False) -> tuple[Any, str, Kind | None]:
    """A tensor's values and dtype name: as numpy, or (`keep`: a CUDA tensor, or a CPU one
    under `TUNING.torch`) the tensor itself with its kind, for the torch path."""
    dtype_name = str(value.dtype).removeprefix("torch.")
    if getattr(value, "is_nested", False):
        raise InvalidOutputError(
            f"{where} is a nested (ragged) torch tensor: pass list(tensor.unbind()) to compare "
            "its tensors one by one, or tensor.to_padded_tensor(0.0)"
        )
    if getattr(value, "is_meta", False):
        raise InvalidOutputError(f"{where} is a torch tensor on the meta device: it has no values")
    if getattr(value, "is_quantized", False):
        raise InvalidOutputError(
            f"{where} is a quantized torch tensor ({dtype_name}): pass tensor.dequantize()"
        )
    if getattr(value, "is_complex", lambda: False)() or dtype_name.startswith("complex"):
        raise InvalidOutputError(
            f"{where} is a complex tensor ({dtype_name}); only bool, integer and float "
            "outputs compare"
        )
    tensor = value.detach()
    if str(tensor.layout) != "torch.strided":
        tensor = tensor.to_dense()  # sparse COO / CSR: compare the values they stand for
    # CUDA (ROCm's too): float64 there; MPS has none, so its tensors come to the host
    if keep and (tensor.device.type == "cuda" or (TUNING.torch and tensor.device.type == "cpu")):
        kind = TORCH_KINDS.get(dtype_name)
        if kind is not None:
            return tensor, dtype_name, kind
        if dtype_name.startswith("float8"):  # float32 holds every float8 value exactly
            return tensor.float(), dtype_name, "float"
    return _host(tensor, dtype_name)


def _host(tensor: Any, dtype_name: str) -> tuple[np.ndarray, str, None]:
    """A tensor's values as a numpy array (its kind from that array's dtype)."""
    tensor = STAGING.to_host(tensor)
    if dtype_name == "bfloat16":  # float32 holds every bfloat16 exactly
        try:
            import ml_dtypes

            return tensor.float().numpy().astype(ml_dtypes.bfloat16), dtype_name, None
        except ImportError:
            return tensor.float().numpy(), dtype_name, None
    if dtype_name.startswith("float8"):
        # numpy has no float8; float32 holds every float8 value exactly.
        return tensor.float().numpy(), dtype_name, None
    return tensor.numpy(), dtype_name, None


#: The dtypes the torch path computes with (`tensors`): others are compared on the host.
TORCH_KINDS: dict[str, Kind] = {
    "bool": "bool",
    "uint8": "uint",
    **{name: "int" for name in ("int8", "int16", "int32", "int64")},
    **{name: "float" for name in ("float16", "bfloat16", "float32", "float64")},
}


def on_host(named: NamedArray) -> NamedArray:
    """An output kept as a tensor (`keep_device`), as numpy values on the host."""
    if isinstance(named.array, np.ndarray):
        return named
    return NamedArray(host_array(named.array), named.dtype_name, named.kind)


def host_array(array: Any) -> np.ndarray:
    """A tensor's values as a numpy array (an array-like's as np.asarray gives it)."""
    if is_torch_tensor(array):
        return _host(array.detach(), str(array.dtype).removeprefix("torch."))[0]
    return np.asarray(array)


def is_torch_tensor(value: Any) -> bool:
    kind = type(value)  # (numpy's arrays first: the common case, at once)
    return (
        kind is not np.ndarray
        and kind.__module__.split(".")[0] == "torch"
        and hasattr(value, "detach")
    )


def as_named_array(value: Any, output: str, side: str, keep_device: bool = False) -> NamedArray:
    """Convert one output to a numeric array, or raise a one-line error naming it;
    `keep_device`: a torch tensor on a device stays there (`_from_torch`)."""
    where = f"output {output!r} ({side})"
    if type(value) is np.ndarray:  # as np.asarray gives it
        array, dtype_name = value, _dtype_name(value.dtype)
    elif isinstance(value, (str, bytes)):
        raise InvalidOutputError(f"{where} is a {type(value).__name__}, not an array")
    elif is_torch_tensor(value):
        array, dtype_name, tensor_kind = _from_torch(value, where, keep_device)
        if tensor_kind is not None:
            return NamedArray(array=array, dtype_name=dtype_name, kind=tensor_kind)
    else:
        try:
            array = np.asarray(value)
        except (ValueError, TypeError) as exc:
            raise InvalidOutputError(
                f"{where} cannot be read as an array ({type(value).__name__}): {exc}"
            ) from None
        dtype_name = _dtype_name(array.dtype)
    kind = dtype_kind(array.dtype)
    if kind is None:
        what = {
            "U": "a string tensor",
            "S": "a bytes tensor",
            "O": f"an object array (from {type(value).__name__})",
            "c": "a complex tensor",
            "M": "a datetime tensor",
            "m": "a timedelta tensor",
        }.get(array.dtype.kind, f"of unsupported dtype {array.dtype}")
        raise InvalidOutputError(f"{where} is {what}; only bool, integer and float outputs compare")
    if array.dtype.kind == "f" and array.dtype.itemsize > 8:
        _check_float64_range(array, where)
    return NamedArray(array=array, dtype_name=dtype_name, kind=kind)


def _check_float64_range(array: np.ndarray, where: str) -> None:
    """long double is compared in float64: values beyond its range would become inf there,
    and non-zero values below its smallest subnormal would become 0, and compare equal (1e-400
    against 0 with atol=rtol=0 would pass), so refuse them instead of passing silently."""
    finite = np.isfinite(array)
    with np.errstate(over="ignore", under="ignore"):
        as_float64 = array.astype(np.float64)
    for lost, beyond in (
        (finite & ~np.isfinite(as_float64), "beyond float64's range"),
        ((array != 0) & (as_float64 == 0), "below float64's smallest subnormal (they become 0)"),
    ):
        if lost.any():
            index = tuple(int(i) for i in np.argwhere(lost)[0])
            raise InvalidOutputError(
                f"{where} is {array.dtype} with values {beyond}, e.g. {array[index]!r} at "
                f"{index}; comparisons run in float64: scale the output or compare it as float64"
            )


def as_output_mapping(outputs: Any, side: str, keep_device: bool = False) -> dict[str, NamedArray]:
    """A mapping of name to array-like (or one bare array) as {name: NamedArray}
    (`keep_device`: see `as_named_array`).

    Names are compared as text, so two keys that read the same (1 and "1") are an error."""
    if isinstance(outputs, Mapping):
        named: dict[str, NamedArray] = {}
        keys: dict[str, Any] = {}
        for name, value in outputs.items():
            text = str(name)
            if text in keys:
                raise InvalidOutputError(
                    f"{side} has two outputs named {text!r}: keys {keys[text]!r} and {name!r}"
                )
            keys[text] = name
            named[text] = as_named_array(value, text, side, keep_device)
        return named
    if isinstance(outputs, (str, bytes)) or outputs is None:
        raise InvalidOutputError(
            f"{side} must be a mapping of output name to array (or one array), "
            f"got {type(outputs).__name__}"
        )
    return {SINGLE_OUTPUT_NAME: as_named_array(outputs, SINGLE_OUTPUT_NAME, side, keep_device)}


# -- sequence and optional outputs ------------------------------------------------------------


@dataclass(frozen=True)
class Structure:
    """What a sequence or optional output is on each side ('sequence of 3', 'empty optional',
    'tensor'); `problem` is set when the two cannot be compared element by element."""

    actual: str
    expected: str
    problem: str | None


def _is_sequence(value: Any) -> bool:
    """A list or tuple of arrays (a runner's sequence output); a list of numbers is an array."""
    return isinstance(value, (list, tuple)) and any(
        item is None or _is_sequence(item) or isinstance(item, np.ndarray) or is_torch_tensor(item)
        for item in value
    )


def _what(value: Any, sequence: bool) -> str:
    if value is None:
        return "empty optional"
    if sequence:
        return f"sequence of {len(value)}"
    return "tensor"


def flatten_structured(
    actual: Any, expected: Any
) -> tuple[Any, Any, dict[str, Structure], dict[str, list[str]]]:
    """Sequence outputs `seq` become `seq[0]`, `seq[1]` ... on both sides; an empty optional
    (None) disappears. Returns both sides, the structure of every such output (with a problem
    where lengths or kinds differ) and the names each output became, in order (itself first)."""
    if not (isinstance(actual, Mapping) and isinstance(expected, Mapping)):
        return actual, expected, {}, {}
    structured = [
        str(name)
        for name, value in [*actual.items(), *expected.items()]
        if value is None or _is_sequence(value)
    ]
    if not structured:
        return actual, expected, {}, {}
    flat_a = {str(k): v for k, v in actual.items()}
    flat_e = {str(k): v for k, v in expected.items()}
    structures: dict[str, Structure] = {}
    expanded: dict[str, list[str]] = {}
    for name in dict.fromkeys(structured):
        if name in flat_a and name in flat_e:  # else: reported as missing on one side
            a, e = flat_a.pop(name), flat_e.pop(name)
            expanded[name] = _expand(name, a, e, flat_a, flat_e, structures)
    return flat_a, flat_e, structures, expanded


def _expand(
    name: str,
    a: Any,
    e: Any,
    flat_a: dict[str, Any],
    flat_e: dict[str, Any],
    structures: dict[str, Structure],
) -> list[str]:
    """Put the comparable leaves of one output pair into flat_a / flat_e; their names."""
    if not (a is None or e is None or _is_sequence(a) or _is_sequence(e)):
        flat_a[name], flat_e[name] = a, e
        return [name]
    a_seq = a is not None and isinstance(a, (list, tuple))
    e_seq = e is not None and isinstance(e, (list, tuple))
    what_a, what_e = _what(a, a_seq), _what(e, e_seq)
    problem = None
    if (a is None) != (e is None) or a_seq != e_seq:
        problem = f"{what_a}, expected {what_e}"
    elif a_seq and len(a) != len(e):
        problem = (
            f"sequence of {len(a)} element{'' if len(a) == 1 else 's'}, expected {len(e)} "
            f"(the first {min(len(a), len(e))} are compared)"
        )
    structures[name] = Structure(what_a, what_e, problem)
    names = [name]
    if a_seq and e_seq:
        for index in range(min(len(a), len(e))):
            names += _expand(f"{name}[{index}]", a[index], e[index], flat_a, flat_e, structures)
    return names

"""What a torch model returns, as named tensors: any structure flattened to stable names.

A tensor alone is `output`; a top-level tuple or list gives `output_0`, `output_1`, ...; a
dict, a dataclass or a Hugging Face `ModelOutput` gives its keys (`logits`), nested ones joined
by dots (`hidden_states.0`, `cache.1.key`). Leaves come in `torch.utils._pytree` order, the
order in which `torch.onnx.export` flattens the outputs it writes, so the n-th leaf is the
export's n-th output. `None` entries are left out (as pytree and `ModelOutput` do). A key/value
cache that pytree does not know (transformers' `DynamicCache`: `layers[i].keys / .values`, or
older `key_cache` / `value_cache` lists) gives `<path>.<layer>.key` and `<path>.<layer>.value`.
An encoder-decoder cache gives `<path>.self_attention_cache.<layer>.key` ... and
`<path>.cross_attention_cache.<layer>.value`. Python numbers become 0-d arrays; anything
else (a string, an object) is a `NotATensor` leaf, an error naming its path when it is to be
compared (`outputs=[...]` can leave it out).
"""

from __future__ import annotations

import dataclasses
import numbers
from collections.abc import Iterator
from typing import Any

import numpy as np

from ..engine import STAGING
from ..errors import InvalidOutputError


def flatten_outputs(result: Any, runner: str) -> list[tuple[str, Any]]:
    """(name, leaf) for every tensor, array or number in `result`, in pytree order."""
    from torch.utils import _pytree as pytree

    if _is_leaf_value(result):
        return [("output", result)]
    top_sequence = isinstance(result, (tuple, list)) and not hasattr(result, "_fields")
    found = []
    for path, leaf in _leaves(pytree, result, ()):
        if top_sequence and path:
            path = (f"output_{path[0]}", *path[1:])
        found.append((".".join(path) or "output", leaf))
    names = [name for name, _ in found]
    duplicated = sorted({name for name in names if names.count(name) > 1})
    if duplicated:
        raise InvalidOutputError(
            f"{runner}: the model's outputs flatten to the same name more than once "
            f"({', '.join(duplicated)}); give output_names=[...] ({len(names)} names)"
        )
    return found


def _is_leaf_value(value: Any) -> bool:
    return _is_tensor(value) or isinstance(value, np.ndarray)


def _is_tensor(value: Any) -> bool:
    import torch

    return isinstance(value, torch.Tensor)


def _leaves(
    pytree: Any, value: Any, prefix: tuple[str, ...]
) -> Iterator[tuple[tuple[str, ...], Any]]:
    for key_path, leaf in pytree.tree_flatten_with_path(value)[0]:
        path = prefix + tuple(_key_text(key) for key in key_path)
        if _is_leaf_value(leaf):
            yield path, leaf
        elif leaf is None:
            continue
        elif isinstance(leaf, (bool, numbers.Number)) and not isinstance(leaf, complex):
            yield path, np.asarray(leaf)
        elif (cache := _cache_layers(leaf)) is not None:
            for index, (key, val) in enumerate(cache):
                yield (*path, str(index), "key"), key
                yield (*path, str(index), "value"), val
        elif all(_cache_layers(getattr(leaf, part, None)) is not None for part in _CACHE_PARTS):
            for part in _CACHE_PARTS:  # transformers' EncoderDecoderCache (T5, BART)
                yield from _leaves(pytree, {part: getattr(leaf, part)}, path)
        elif dataclasses.is_dataclass(leaf) and not isinstance(leaf, type):
            fields = {f.name: getattr(leaf, f.name) for f in dataclasses.fields(leaf)}
            yield from _leaves(pytree, fields, path)
        else:
            yield path, NotATensor(".".join(path) or "the output", leaf)


_CACHE_PARTS = ("self_attention_cache", "cross_attention_cache")


class NotATensor:
    """An output leaf the runner cannot compare; an error only if it is to be compared."""

    def __init__(self, where: str, value: Any) -> None:
        short = text if len(text := repr(value)) <= 60 else text[:57] + "..."
        self.error = InvalidOutputError(
            f"output {where!r} is {type(value).__name__} ({short}), not a tensor: the "
            "torch runner compares tensors, numbers, and tuples, lists, dicts or dataclasses of "
            "them; outputs=[...] selects the ones to compare"
        )


def _key_text(key: Any) -> str:
    for attribute in ("key", "idx", "name"):  # MappingKey, SequenceKey, GetAttrKey
        if hasattr(key, attribute):
            return str(getattr(key, attribute))
    return str(key)


def _cache_layers(value: Any) -> list[tuple[Any, Any]] | None:
    """A transformers key/value cache as [(keys, values) per layer]; None for anything else."""
    layers = getattr(value, "layers", None)
    if isinstance(layers, (list, tuple)) and all(
        _is_tensor(getattr(layer, "keys", None)) and _is_tensor(getattr(layer, "values", None))
        for layer in layers
    ):
        return [(layer.keys, layer.values) for layer in layers]
    keys, values = getattr(value, "key_cache", None), getattr(value, "value_cache", None)
    if isinstance(keys, list) and isinstance(values, list) and len(keys) == len(values):
        return list(zip(keys, values, strict=True))
    return None


def to_numpy(tensor: Any) -> np.ndarray:
    """A fresh host array the caller owns; bfloat16 and float8 through ml_dtypes (as float32
    when ml_dtypes is not installed)."""
    if isinstance(tensor, np.ndarray):
        return np.array(tensor, copy=True)
    import torch

    tensor = tensor.detach()
    if tensor.is_nested:
        raise InvalidOutputError("a nested tensor cannot be compared; unbind it first")
    tensor = STAGING.to_host(tensor)  # a CUDA tensor's through the pinned buffer
    name = str(tensor.dtype).removeprefix("torch.")
    if name.startswith(("bfloat16", "float8")):
        try:
            import ml_dtypes
        except ImportError:
            return np.asarray(tensor.float().numpy())
        bits = {1: torch.uint8, 2: torch.int16}[tensor.element_size()]
        return np.asarray(tensor.view(bits).numpy().copy().view(getattr(ml_dtypes, name)))
    return np.array(tensor.numpy(), copy=True)

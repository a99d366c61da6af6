"""A framework's exception during inference, as one message: which runner, on what feed, at
which node, and the library's own last line. The library's traceback (without our frames)
is kept on the error for --tb=long and -vv."""

from __future__ import annotations

import re
import traceback
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import InferenceError

_OURS = str(Path(__file__).resolve().parents[1])
#: onnxruntime: "Non-zero status code returned while running Reshape node. Name:'/Reshape_3'"
_ORT_NODE = re.compile(r"running (\w+) node\. Name:'([^']*)'")


def inference_error(runner: Any, feed: Mapping[str, Any], error: BaseException) -> InferenceError:
    """The InferenceError to raise from `error` (raise it `from error`)."""
    head = f"{runner.name} failed running the model on {describe_feed(feed)}"
    text = ": ".join(part for part in (head, _node_of(error), library_line(error)) if part)
    where = _library_frame(error)
    if where:
        text += f" ({where})"
    hint = _dtype_hint(runner, feed, error) or _range_hint(feed, error)
    if hint:
        text += f"\n{hint}"
    failure = InferenceError(text)
    failure.details = library_traceback(error)
    return failure


def describe_feed(feed: Mapping[str, Any]) -> str:
    """'input_ids: int64[2, 8], attention_mask: int64[2, 8]' (sequences and None said so)."""
    if not feed:
        return "an empty feed"
    return ", ".join(f"{name}: {_value_text(value)}" for name, value in feed.items())


def _value_text(value: Any) -> str:
    if value is None:
        return "None"
    if isinstance(value, (list, tuple)):
        return f"list of {len(value)}"
    dtype = str(getattr(value, "dtype", type(value).__name__)).removeprefix("torch.")
    shape = getattr(value, "shape", ())
    return f"{dtype}[{', '.join(str(int(d)) for d in shape)}]"


def library_line(error: BaseException, limit: int = 400) -> str:
    """'ValueError: cannot reshape ...': the exception's type and the first line of its text
    (onnxruntime's with the C++ location cut out), and the one it was raised while handling,
    where the library's fallback failed too: that one often names the real cause
    (onnx.reference's GatherElements: `np.choose` takes at most 64 arrays)."""
    line = _first_line(error, limit)
    context = error.__context__
    if context is not None and error.__cause__ is None and not error.__suppress_context__:
        line += f" (raised while handling {_first_line(context, limit // 2)})"
    return line


def _first_line(error: BaseException, limit: int) -> str:
    text = str(error).strip()
    if text.startswith("[ONNXRuntimeError]"):
        text = tidy_onnxruntime_text(text)
    lines = [line for line in text.splitlines() if line.strip()]
    first = lines[0] if lines else ""
    if first.startswith("The following operation failed in the TorchScript interpreter"):
        return lines[-1].strip()  # its traceback, then the error at its end: 'RuntimeError: ..'
    if len(first) > limit:  # its end says most (shapes, versions): cut in the middle
        first = f"{first[: limit // 3]} ... {first[-(limit - limit // 3 - 5) :]}"
    return f"{type(error).__name__}: {first}" if first else type(error).__name__


#: A C++ source location and the function signature after it, as onnxruntime puts them before
#: what it has to say: `/onnxruntime_src/.../reshape_helper.h:91 onnxruntime::ReshapeHelper::
#: ReshapeHelper(const onnxruntime::TensorShape&, ...) ` (a return type may precede the name),
#: at the start of the message or after its "Status Message: " (a failure at run time).
_CPP_LOCATION = re.compile(
    r"(?<![^\s])[^\s:]+\.(?:cc|cpp|cxx|h|hpp|cu):\d+ "
    r"(?:(?:[\w:<>*&]+ )?[^\s()]*\((?:[^()]|\((?:[^()]|\([^()]*\))*\))*\)(?: const)? )?"
)


def tidy_onnxruntime_text(text: str) -> str:
    """onnxruntime's message without the C++ source locations and signatures in it, and cut
    (if at all) in the middle, so the versions and shapes it names at its end survive."""
    text = _CPP_LOCATION.sub("", text.strip())
    return text if len(text) <= 600 else f"{text[:200]} ... {text[-380:]}"


def _node_of(error: BaseException) -> str:
    """ "node '/Reshape_3' (Reshape)" where the library says which node failed."""
    match = _ORT_NODE.search(str(error))
    if match:
        return f"node {match.group(2)!r} ({match.group(1)})"
    for frame, _ in traceback.walk_tb(error.__traceback__):  # onnx.reference: OpRun.run(self)
        node = getattr(frame.f_locals.get("self"), "onnx_node", None)
        if node is not None and hasattr(node, "op_type"):
            name = node.name or (node.output[0] if node.output else "")
            return f"node {name!r} ({node.op_type})"
    return ""


def _library_frame(error: BaseException) -> str:
    """'at modeling_gpt2.py:683 in forward': the innermost frame outside torch's and numpy's
    internals and our own code, where a model's own source raised."""
    frames = [f for f in traceback.extract_tb(error.__traceback__) if not _is_ours(f.filename)]
    for frame in reversed(frames):
        path = Path(frame.filename)
        if not any(part in ("torch", "numpy", "onnx", "onnxruntime") for part in path.parts):
            return f"at {path.name}:{frame.lineno} in {frame.name}"
    return ""


def _is_ours(filename: str) -> bool:
    return str(Path(filename).resolve()).startswith(_OURS)


def library_traceback(error: BaseException) -> str:
    """The error's traceback without the frames of pytest-trtcompare."""
    summary = traceback.TracebackException.from_exception(error)
    summary.stack = traceback.StackSummary.from_list(
        [frame for frame in summary.stack if not _is_ours(frame.filename)]
    )
    return "".join(summary.format()).rstrip()


_INDEX_WORDS = re.compile(r"index out of range|out of bounds|index \S+ is out", re.IGNORECASE)


def _range_hint(feed: Mapping[str, Any], error: BaseException) -> str:
    """An index past a table's rows: say which integer inputs reach how far, and how to bound
    them (synthetic integers default to [0, 10])."""
    if not _INDEX_WORDS.search(str(error)):
        return ""
    reach = {
        name: int(value.max())
        for name, value in feed.items()
        if isinstance(value, np.ndarray) and value.dtype.kind in "iu" and value.size
    }
    if not reach:
        return ""
    shown = ", ".join(f"{name} up to {top}" for name, top in reach.items())
    return (
        f"(an integer input may index past a table's rows: {shown}; synthetic integers are "
        "drawn from [0, 10] unless the model says its table's size: bound the input, "
        f"val_range={{{next(iter(reach))!r}: (0, rows - 1)}})"
    )


_DTYPE_WORDS = re.compile(r"Long|Int\b|integer|scalar type|dtype|indices", re.IGNORECASE)


def _dtype_hint(runner: Any, feed: Mapping[str, Any], error: BaseException) -> str:
    """When a runner had to guess float32 for inputs (a torch module without input_specs),
    the feed is just that and the library complains of types, say how to give the dtypes."""
    if not getattr(runner, "dtypes_guessed", False) or not _DTYPE_WORDS.search(str(error)):
        return ""
    guessed = [
        name
        for name, value in feed.items()
        if isinstance(value, np.ndarray) and value.dtype == np.float32
    ]
    if not guessed:
        return ""
    example = ", ".join(f"{name!r}: ('int64', {tuple(feed[name].shape)})" for name in guessed[:2])
    return (
        f"(the torch runner has no input dtypes, so it made {guessed} float32; if the model "
        f"takes integers, give them: input_specs={{{example}}}, or compare against its ONNX "
        "export, whose inputs it then takes)"
    )

"""The isolated worker's side (runners/isolated.py starts it) and how arrays and torch modules
cross the pipe.

One worker process serves every runner of one (framework, precision, options) in a session:
it builds a runner per model when asked ("build", handle, spec), answers "infer" and
"specs_for" for a handle, closes one on "drop", and everything on "close". Arrays cross as
(dtype, shape, raw bytes), or, above 16 MiB, as raw files in a private temp folder (each
read once and removed); ml_dtypes' dtypes (bfloat16, float8, int4), whose numpy string is
only '<V2', cross by name. Object arrays never cross and nothing is unpickled into an array.

A torch module the spawned process cannot unpickle (a class defined inside a function, as
torch twins often are) crosses as an ExportedProgram. `torch.export` needs example inputs, so
such a module is exported at the first feed, after the runner's own cast to its precision and
device, with every dimension `Dim.AUTO` (other batch sizes and sequence lengths run the same
program; dims of size 1 are grown to 2 for the export so that they are not specialised), and
saved with `torch.export.save` to the worker's private folder. The worker loads it and runs
it through the torch runner.
"""

from __future__ import annotations

import logging
import os
import pickle
import threading
import warnings
from contextlib import nullcontext, suppress
from pathlib import Path
from typing import Any

import numpy as np

from ..engine import dtype_from_name
from ..errors import ModelLoadError, TrtCompareError
from .base import Runner

FILE_THRESHOLD = 16 << 20
ROOT_LOGGER = "pytest_trtcompare"
#: The model field of a worker spec that names a saved ExportedProgram.
EXPORTED = "torch.export file"


def pack(arrays: dict[str, Any], folder: Path, prefix: str) -> dict[str, Any]:
    return {
        name: _pack_value(name, value, folder, f"{prefix}-{index}")
        for index, (name, value) in enumerate(arrays.items())
    }


def _pack_value(name: str, value: Any, folder: Path, prefix: str) -> Any:
    """An array as (dtype, shape, bytes) or a file; a sequence as a list; None as is."""
    if value is None:
        return ("none",)
    if isinstance(value, (list, tuple)):
        return ("seq", [_pack_value(name, v, folder, f"{prefix}-{i}") for i, v in enumerate(value)])
    if hasattr(value, "detach"):  # a torch runner's tensor on its device: the host's copy
        from .torch_outputs import to_numpy

        value = to_numpy(value)
    array = np.require(value, requirements="C")  # (np.ascontiguousarray makes 0-d 1-d)
    if array.dtype.hasobject:
        raise TrtCompareError(f"{name!r} is an object array; it cannot cross processes")
    if array.nbytes > FILE_THRESHOLD:
        path = folder / f"{prefix}.bin"
        array.tofile(path)
        return ("file", _dtype_token(array.dtype), array.shape, str(path))
    return ("bytes", _dtype_token(array.dtype), array.shape, array.tobytes())


def _dtype_token(dtype: np.dtype) -> str:
    """numpy's own dtypes by their exact string ('<f4'); ml_dtypes' (bfloat16, float8, int4),
    whose string ('<V2', '<f1') numpy cannot read back, by name."""
    with suppress(TypeError):
        if np.dtype(dtype.str) == dtype:
            return str(dtype.str)
    return str(dtype.name)


def unpack(packed: dict[str, Any]) -> dict[str, Any]:
    return {name: _unpack_value(item) for name, item in packed.items()}


def _unpack_value(item: Any) -> Any:
    if item[0] == "none":
        return None
    if item[0] == "seq":
        return [_unpack_value(v) for v in item[1]]
    kind, token, shape, data = item
    dtype = dtype_from_name(token)  # '<f4' and 'bfloat16' alike
    if kind == "file":
        array = np.fromfile(data, dtype=dtype).reshape(shape)
        Path(data).unlink(missing_ok=True)  # a long-lived worker would pile them up
        return array
    return np.frombuffer(data, dtype=dtype).reshape(shape).copy()


class _LogRelay(logging.Handler):
    """In the worker: each record of the main thread goes to the parent as ("log", fields)."""

    def __init__(self, connection: Any) -> None:
        super().__init__()
        self.connection = connection

    def emit(self, record: logging.LogRecord) -> None:
        if threading.current_thread() is not threading.main_thread():
            return  # the pipe is the main thread's: a second sender would garble it
        try:
            fields = {
                key: value
                for key, value in vars(record).items()
                if isinstance(value, (str, int, float)) and key != "msg"
            }
            fields["msg"] = f"{record.getMessage()} [worker pid {os.getpid()}]"
            self.connection.send(("log", fields))
        except Exception:
            self.handleError(record)


def serve(connection: Any, stderr_path: str, folder: str, log_level: int) -> None:
    """The worker: build runners when asked, answer their requests until told to stop."""
    with open(stderr_path, "ab", buffering=0) as stderr:
        os.dup2(stderr.fileno(), 2)
    logger = logging.getLogger(ROOT_LOGGER)
    logger.setLevel(log_level)
    logger.addHandler(_LogRelay(connection))
    logger.propagate = False  # the parent decides where records go
    built: dict[int, Runner] = {}
    calls = 0
    while True:
        message = connection.recv()
        kind = message[0]
        if kind == "close":
            for runner in built.values():
                runner.close()
            return
        handle: int = message[1]
        if kind == "drop":  # no reply: the parent does not wait for it
            dropped = built.pop(handle, None)
            if dropped is not None:
                dropped.close()
            continue
        try:
            if kind == "build":
                runner = _build(message[2])
                built[handle] = runner
                connection.send(("ready", *shape_of(runner)))
                continue
            runner = built[handle]
            if kind == "specs_for":  # a torch runner's optional forward parameters
                specs_for = getattr(runner, "specs_for", None)
                connection.send(("specs", specs_for(message[2]) if specs_for else []))
                continue
            if kind == "layer_bytes":  # outputs="all": the sizes its budget groups by
                connection.send(("bytes", runner.layer_bytes(message[2])))
                continue
            selection = message[3]
            with nullcontext() if selection is None else runner.select_outputs(selection):
                outputs = runner.infer(unpack(message[2]))
            calls += 1
            packed = pack(outputs, Path(folder), f"out{calls}")
            seconds = runner.inference_times[-1]  # the framework's time, not the pipe's
            connection.send(("outputs", packed, runner.output_names(), runner.layers, seconds))
        except BaseException as exc:  # the parent re-raises it with its type name
            connection.send(("error", type(exc).__name__, str(exc)))


def _build(spec: dict[str, Any]) -> Runner:
    """The spec's runner: of its model as it came, or of an ExportedProgram from its file."""
    from .registry import create_local

    model = spec["model"]
    if isinstance(model, tuple) and len(model) == 2 and model[0] == EXPORTED:
        import torch

        model = torch.export.load(model[1])
    return create_local(spec["name"], model, spec["precision"], **spec["options"])


def shape_of(runner: Runner) -> tuple[Any, ...]:
    """What the parent needs to answer for the runner without asking the worker."""
    return (
        runner.input_specs(),  # TensorSpec dataclasses pickle as they are
        runner.output_names(),
        runner.describe(),
        runner.layers,  # Layer dataclasses pickle as they are
        runner.checks_feed,
        getattr(runner, "signature", None),  # a torch runner's ForwardSignature
        getattr(runner, "dtypes_guessed", False),
    )


def needs_export(name: str, model: Any) -> bool:
    """A torch module or ExportedProgram that pickle cannot send to a spawned process."""
    if name != "torch" or type(model).__module__.split(".")[0] == "builtins":
        return False
    try:
        pickle.dumps(model)
    except Exception:  # local classes, lambdas, open handles ...
        return True
    return False


def export_to_file(runner: Any, feed: dict[str, Any], folder: Path) -> tuple[str, str]:
    """Export the local torch runner's prepared module for this feed; the worker's model.

    The feed binds to forward as the runner binds it (keywords where it can), so the program
    takes the same names: the worker's runner binds its feeds the same way."""
    torch = runner.torch
    args, kwargs = runner.signature.bind(
        {name: runner._to_tensor(value) for name, value in feed.items()}, runner.name
    )

    def auto(arg: Any) -> Any:
        return {dim: torch.export.Dim.AUTO for dim in range(arg.ndim)} if arg.ndim else None

    dynamic: Any = tuple(auto(arg) for arg in args)
    if kwargs:
        dynamic = {name: auto(value) for name, value in kwargs.items()}
        if args:  # a dict must name the positional ones too
            names = [p.name for p in runner.signature.parameters][: len(args)]
            dynamic.update({name: auto(arg) for name, arg in zip(names, args, strict=False)})
    # torch.export specialises dims of size 0 / 1 to constants: export with those grown to 2
    # (the program still runs size 1), falling back to the feed as is where 2 cannot be.
    grown = (
        tuple(_grown(torch, arg) for arg in args),
        {name: _grown(torch, value) for name, value in kwargs.items()},
    )
    try:
        try:
            program = torch.export.export(
                runner.module, grown[0], kwargs=grown[1], dynamic_shapes=dynamic
            )
        except Exception:
            program = torch.export.export(
                runner.module, tuple(args), kwargs=kwargs, dynamic_shapes=dynamic
            )
    except Exception as exc:
        raise ModelLoadError(
            f"torch runner: the module cannot be pickled for the isolated worker (its class "
            f"is local to a function) and torch.export failed on it "
            f"({type(exc).__name__}: {str(exc).strip().splitlines()[0][:300]}); define the "
            "module's class at module level, or run it with isolate=False"
        ) from None
    path = folder / "module.pt2"
    with warnings.catch_warnings():  # "No complete tensor found in the group": CPU weights
        warnings.filterwarnings("ignore", message="No complete tensor found")
        torch.export.save(program, str(path))
    return (EXPORTED, str(path))


def _grown(torch: Any, tensor: Any) -> Any:
    for dim, size in enumerate(tensor.shape):
        if size == 1:
            tensor = torch.cat([tensor, tensor], dim=dim)
    return tensor

"""Torch modules for an isolated worker: a module the spawned process cannot unpickle (a class
defined inside a function, as torch twins often are) crosses as an ExportedProgram.

`torch.export` needs example inputs, so such a module is exported at the first feed, after
the runner's own cast to its precision and device, with every dimension `Dim.AUTO` (other
batch sizes and sequence lengths run the same program; dims of size 1 are grown to 2 for the
export so that they are not specialised), and saved with `torch.export.save`
to the worker's private folder. The worker loads it and runs it through the torch runner.
"""

from __future__ import annotations

import pickle
import warnings
from pathlib import Path
from typing import Any

from ..errors import ModelLoadError

#: The model field of a worker spec that names a saved ExportedProgram.
EXPORTED = "torch.export file"


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


def load_exported(model: Any) -> Any:
    """The worker's side: an ExportedProgram from its file; any other model as it came."""
    if isinstance(model, tuple) and len(model) == 2 and model[0] == EXPORTED:
        import torch

        return torch.export.load(model[1])
    return model

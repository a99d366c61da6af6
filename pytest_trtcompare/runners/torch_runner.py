"""PyTorch runner: nn.Module, TorchScript, ExportedProgram or a plain function.

fp16 / bf16 are real: a copy of the module is cast with `.to(dtype)` and float inputs are
cast too (not autocast, which keeps many ops in float32); integer and bool inputs (token ids,
masks) keep their dtype. tf32 is CUDA only; fp32 on CUDA runs with TF32 switched off for the
call. The feed binds to `forward` by name (torch_binding.py); what the model returns is
flattened to named tensors (torch_outputs.py); `outputs="all"` adds every submodule's output
(torch_layers.py).
"""

from __future__ import annotations

import contextlib
import copy
import os
import warnings
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ..engine import TUNING
from ..errors import (
    FeedError,
    FrameworkUnavailable,
    InputDataError,
    ModelLoadError,
    PrecisionUnsupported,
    RunnerOptionError,
)
from .base import Layer, Runner, TensorSpec, specs_from
from .computed import Computed
from .torch_binding import ForwardSignature
from .torch_outputs import NotATensor, flatten_outputs, to_numpy

if TYPE_CHECKING:
    from .torch_layers import ModuleTaps

_DTYPES = {
    "fp32": "float32",
    "tf32": "float32",
    "fp16": "float16",
    "bf16": "bfloat16",
    "fp64": "float64",
}


def _device_name(torch: Any, device: Any) -> str:
    """'cuda:0' from 'cuda:0', 0 or a torch.device; a RunnerOptionError for anything else
    (and for `meta`: no values); FrameworkUnavailable (a skip) for a device this torch cannot
    use here (no CUDA, an MPS or XLA device on a build without it)."""
    if isinstance(device, int) and not isinstance(device, bool) and device >= 0:
        name = f"cuda:{device}"  # torch's meaning of a bare index
    elif isinstance(device, (str, torch.device)):
        try:
            name = str(torch.device(device))
        except (RuntimeError, ValueError) as exc:
            problem = str(exc).strip().splitlines()[0]
            raise RunnerOptionError(
                f"torch runner: device={device!r} is not a torch device ({problem}); give "
                "'cpu', 'cuda' or 'cuda:N'"
            ) from None
    else:
        raise RunnerOptionError(
            f"torch runner: device={device!r} ({type(device).__name__}) is not a torch device; "
            "give 'cpu', 'cuda' or 'cuda:N'"
        )
    if name == "meta":
        raise RunnerOptionError(
            "torch runner: device='meta' holds no values to compare; give 'cpu', 'cuda' or 'cuda:N'"
        )
    if name.startswith("cuda") and not torch.cuda.is_available():
        raise FrameworkUnavailable(f"torch {torch.__version__} sees no CUDA device for {name!r}")
    if not name.startswith(("cpu", "cuda")):
        try:
            torch.empty(0, device=name)
        except Exception as exc:  # NotImplementedError (MPS, XLA), AssertionError (XPU) ...
            problem = str(exc).strip().splitlines()[0].split(". ")[0]
            raise FrameworkUnavailable(
                f"torch {torch.__version__} cannot use device {name!r} here ({problem})"
            ) from None
    return name


#: Hugging Face inputs that index a table, and the config field that says its rows.
_TABLE_SIZES = {
    "input_ids": "vocab_size",
    "decoder_input_ids": "vocab_size",
    "token_type_ids": "type_vocab_size",
    "position_ids": "max_position_embeddings",
}


def _names(option: str, value: Any) -> Sequence[str] | None:
    """A names option checked: a list (or tuple) of distinct non-empty strings."""
    if value is None:
        return None
    if not isinstance(value, (list, tuple)) or not all(isinstance(n, str) and n for n in value):
        got = f"{type(value).__name__} {value!r}"
        raise RunnerOptionError(f"torch runner: {option}= takes a list of names, not {got}")
    twice = sorted({name for name in value if value.count(name) > 1})
    if twice:
        raise RunnerOptionError(f"torch runner: {option}={list(value)} names {twice} twice")
    return value


def _config_size(config: Any, field: str) -> Any:
    """`config.<field>`, else that of a sub-config of a composite config (CLIP's
    `text_config.vocab_size`): the text one first, else the one value they agree on."""
    own = getattr(config, field, None)
    if own is not None or config is None:
        return own
    subs = [v for v in vars(config).values() if hasattr(v, "to_dict") and hasattr(v, field)]
    text = getattr(config, "text_config", None)
    if text is not None and hasattr(text, field):
        return getattr(text, field)
    values = {getattr(sub, field) for sub in subs}
    return values.pop() if len(values) == 1 else None


def _array(value: Any) -> np.ndarray:
    if isinstance(value, NotATensor):
        raise value.error
    return to_numpy(value)


def _kept(value: Any) -> Any:
    """An output on its device, the caller's own (a model may return a view of a buffer it
    writes again); not a tensor: as `_array` makes it."""
    if isinstance(value, NotATensor) or not hasattr(value, "detach"):
        return _array(value)
    return value.detach().clone()


class TorchRunner(Runner):
    framework = "torch"
    precisions = ("fp32", "tf32", "fp16", "bf16")
    float64 = True  # module.to(float64)
    takes = ("torch",)
    devices = ("cpu", "cuda")
    layer_names = "modules"

    def __init__(
        self,
        model: Any,
        precision: str = "fp32",
        *,
        input_names: Sequence[str] | None = None,
        output_names: Sequence[str] | None = None,
        device: Any = "cpu",
        input_specs: Any = None,
        outputs: str | Sequence[str] | None = None,
    ) -> None:
        super().__init__(precision)
        try:
            import torch
        except ImportError:
            raise FrameworkUnavailable(
                "torch is not installed: pip install pytest-trtcompare[torch]"
            ) from None
        self.torch = torch
        device = _device_name(torch, device)
        if precision == "tf32" and not device.startswith("cuda"):
            raise PrecisionUnsupported("tf32 is a CUDA matmul mode; the torch runner is on CPU")
        if outputs is not None and outputs != "all" and not isinstance(outputs, (list, tuple)):
            raise ModelLoadError(f"torch runner: outputs={outputs!r}; it takes 'all' or a list")
        self.device = torch.device(device)
        self.dtype = getattr(torch, _DTYPES[precision])
        self._model = model
        self._modes_fixed = False
        self._by_position = False
        self.module = self._prepare(model)
        forward = self.module.forward if isinstance(self.module, torch.nn.Module) else self.module
        self.signature = ForwardSignature.of(forward, _names("input_names", input_names))
        if self._by_position:  # an exported program of positional inputs refuses keywords
            self.signature = self.signature.by_position()
        output_names = _names("output_names", output_names)
        self._output_names = list(output_names) if output_names else None
        self._requested = list(outputs) if isinstance(outputs, (list, tuple)) else None
        given = specs_from(input_specs)
        # without input_specs: the inputs forward needs, as _guessed_spec guesses them
        self._specs = given or [self._guessed_spec(model, n) for n in self.signature.input_names()]
        self.dtypes_guessed = not given
        self.checks_feed = bool(given)
        self._produced: list[str] | None = None  # output names, known after the first run
        self._taps: ModuleTaps | None = None
        if outputs == "all":  # imported here: a runner's first use without layers is faster
            from .torch_layers import ModuleTaps

            self._taps = ModuleTaps(self.module)
        self._layers: list[Layer] | None = None

    def _prepare(self, model: Any) -> Any:
        torch = self.torch
        if isinstance(model, (str, os.PathLike)):
            model = _load(torch, Path(model))
        exported_type: Any = getattr(getattr(torch, "export", None), "ExportedProgram", None)
        if exported_type is not None and isinstance(model, exported_type):
            self._modes_fixed = True  # its modes were fixed at export: train() raises
            self._by_position = _takes_no_keywords(model)
            model = model.module()
        if isinstance(model, torch.nn.Module):
            needs_cast = any(
                t.is_floating_point() and (t.dtype != self.dtype or t.device != self.device)
                for t in [*model.parameters(), *model.buffers()]
            )
            if not needs_cast:
                return model  # used as it is (in eval mode for each call: _evaluating)
            # never change the user's module: a copy of its structure with tensors of its own
            # (Module.to would cast the user's parameters in place, through the Parameter
            # objects a plain copy shares)
            if isinstance(model, torch.jit.ScriptModule):  # its copy ignores the memo
                with warnings.catch_warnings():  # Module.to reads a scripted tensor's .grad
                    warnings.filterwarnings("ignore", "The .grad attribute of a Tensor")
                    copied = copy.deepcopy(model).to(device=self.device, dtype=self.dtype)
                return copied.eval()
            tensors = [*model.parameters(), *model.buffers()]
            return copy.deepcopy(model, {id(t): self._cast(t) for t in tensors}).eval()
        if callable(model):
            return model  # a function: its inputs are cast, its weights are its own business
        raise FeedError(
            "torch runner needs an nn.Module, ExportedProgram, callable or a file of one "
            f"(TorchScript, torch.export's .pt2), got {type(model).__name__}"
        )

    def _cast(self, tensor: Any) -> Any:
        """A tensor of the runner's own, as Module.to(device, dtype) would make it (float
        tensors cast to the precision, the others moved), never the user's."""
        torch = self.torch
        with torch.no_grad():
            dtype = self.dtype if tensor.is_floating_point() else tensor.dtype
            cast = tensor.detach().to(device=self.device, dtype=dtype, copy=True)
        if isinstance(tensor, torch.nn.Parameter):
            return torch.nn.Parameter(cast, requires_grad=tensor.requires_grad)
        return cast

    def _guessed_spec(self, model: Any, name: str) -> TensorSpec:
        """An input's spec without input_specs: float32 of unknown rank, unless the model says
        better (a Hugging Face model's `dummy_inputs` dtypes, `config.vocab_size` as the range
        of its token ids)."""
        try:
            dummy = getattr(model, "dummy_inputs", None)  # a property that builds tensors
        except Exception:
            dummy = None
        known = dummy.get(name) if isinstance(dummy, Mapping) else None
        annotated = self.signature.annotated_dtype(name)
        if known is not None and hasattr(known, "dtype"):
            dtype = str(known.dtype).removeprefix("torch.")
        else:
            dtype = annotated or "float32"
        rows = _config_size(getattr(model, "config", None), _TABLE_SIZES.get(name, "vocab_size"))
        value_range = None
        if (name in _TABLE_SIZES or name.endswith("input_ids")) and isinstance(rows, int):
            value_range = (0.0, float(rows - 1)) if rows > 0 else None
            if value_range and known is None and annotated is None:
                dtype = "int64"  # it indexes a table: an integer, whatever its annotation says
        return TensorSpec(name, dtype, None, value_range=value_range)

    def specs_for(self, names: Sequence[str]) -> list[TensorSpec]:
        """Specs of optional forward parameters a test gives shapes for (the runner's own
        inputs are the required ones): synthetic data for them too. A name forward does not
        take is an InputDataError listing the ones it does."""
        have = {spec.name for spec in self._specs}
        extra = [name for name in names if name not in have]
        if not extra or not self.dtypes_guessed:
            return []
        unknown = [name for name in extra if name not in self.signature.names]
        if unknown and self.signature.known and self.signature.names:
            others = " (**kwargs takes other names: feed them with inputs=)"
            raise InputDataError(
                f"shapes name input(s) {unknown} that {self.signature.text} does not name; "
                f"it names {', '.join(self.signature.names)}"
                + (others if self.signature.var_keyword else "")
            )
        return [self._guessed_spec(self._model, name) for name in extra if name not in unknown]

    def input_specs(self) -> list[TensorSpec]:
        return list(self._specs)

    def no_specs_reason(self) -> str | None:
        """Why synthetic inputs cannot be made: a forward that names no inputs (`*args`,
        `**kwargs` alone) and no input_specs=."""
        if self._specs or self.signature.names or self.signature.positional_names:
            return None
        return (
            f"{self.name}: {self.signature.text} names no inputs, so synthetic data has "
            "nothing to make: give input_specs={'x': ('float32', (2, 8))} (in the order "
            "*args takes them), or a feed with inputs="
        )

    def output_names(self) -> list[str]:
        if self._taps is not None and self._layers is not None:
            return [layer.tensor for layer in self._layers]
        names = self._output_names or self._produced or []
        return [n for n in names if self._requested is None or n in self._requested]

    def free_device_bytes(self) -> int | None:
        """On a CUDA device the outputs stay there (compared where they are)."""
        if self.device.type != "cuda":
            return None
        free, _ = self.torch.cuda.mem_get_info(self.device)
        return int(free)

    def discover_layers(self, feed: Mapping[str, Any]) -> None:
        """outputs="all": run once to learn which submodules produce tensors, in call order."""
        if self._taps is not None and self._layers is None:
            with self.select_outputs([]):  # the layers, not their values
                self.infer(feed)

    @contextlib.contextmanager
    def _evaluating(self) -> Iterator[None]:
        """A module the user left in training mode runs in eval mode (dropout off, batch
        norm statistics read, not updated) and is given back in the modes it had: switching
        costs far less than copying the module."""
        module, modes = self.module, []
        if not self._modes_fixed and isinstance(module, self.torch.nn.Module):
            modes = [(m, m.training) for m in module.modules()]  # one walk: a first use counts it
        if not any(training for _, training in modes):
            yield
            return
        module.train(False)
        try:
            yield
        finally:
            for submodule, training in modes:
                if submodule.training != training:
                    submodule.training = training

    @contextlib.contextmanager
    def _matmul_mode(self) -> Iterator[None]:
        backends = self.torch.backends
        if self.device.type != "cuda":
            yield
            return
        saved = (backends.cuda.matmul.allow_tf32, backends.cudnn.allow_tf32)
        backends.cuda.matmul.allow_tf32 = backends.cudnn.allow_tf32 = self.precision == "tf32"
        try:
            yield
        finally:
            backends.cuda.matmul.allow_tf32, backends.cudnn.allow_tf32 = saved

    def _to_tensor(self, array: Any) -> Any:
        if isinstance(array, self.torch.Tensor):
            tensor = array.to(self.device)
        else:
            array = np.asarray(array)
            if not array.flags.writeable or not array.flags.c_contiguous:
                array = np.array(array, copy=True, order="C")  # torch wants its own memory
            tensor = self.torch.from_numpy(array).to(self.device)
        return tensor.to(self.dtype) if tensor.is_floating_point() else tensor

    def _infer(self, feed: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        args, kwargs = self.signature.bind(
            {name: self._to_tensor(value) for name, value in feed.items()}, self.name
        )
        wanted = None if self._selection is None else set(self._selection)
        taps = self._taps.recording(wanted) if self._taps is not None else contextlib.nullcontext()
        with self.torch.inference_mode(), self._matmul_mode(), self._evaluating(), taps:
            result = self.module(*args, **kwargs)
        named = self._name_outputs(result)
        # on a GPU the outputs stay there, compared where they are (engine/tensors.py); on
        # the CPU numpy takes them, unless TUNING.torch runs the device path here too
        keep = _kept if self.device.type == "cuda" or TUNING.torch else _array
        outputs = {name: keep(value) for name, value in named if wanted is None or name in wanted}
        if self.device.type == "cuda":
            self.torch.cuda.synchronize(self.device)  # the inference time is the run's
        if self._taps is not None:
            if self._layers is None:
                self._layers = self._taps.layers(named, self._produced or [])
            return {**self._taps.taken(), **outputs}
        return outputs

    def _name_outputs(self, result: Any) -> list[tuple[str, Any]]:
        found = flatten_outputs(result, self.name)
        if self._output_names is not None:
            if len(self._output_names) != len(found):
                raise FeedError(
                    f"{self.name}: output_names={self._output_names}, but the model returned "
                    f"{len(found)} tensor(s): {[name for name, _ in found]}"
                )
            found = [
                (new, value) for new, (_, value) in zip(self._output_names, found, strict=True)
            ]
        if self._produced is None:
            self._produced = [name for name, _ in found]
            unknown = [n for n in self._requested or () if n not in self._produced]
            if unknown:
                raise FeedError(
                    f"{self.name}: outputs={self._requested} names {unknown}, which the model "
                    f"does not return; it returns {self._produced}"
                )
        if self._requested is not None:
            found = [(name, value) for name, value in found if name in self._requested]
        return found

    def _what_computed(self) -> Computed | None:
        """The module's parameters by dtype, cast by the runner (module.to, no autocast);
        None for a function, whose weights are its own business."""
        module = self.module
        if not isinstance(module, self.torch.nn.Module):
            return None
        floats = [p for p in module.parameters() if p.is_floating_point()]
        counts = Counter(str(p.dtype).removeprefix("torch.") for p in floats)
        how = "cast by the runner" if self.precision in ("fp16", "bf16") else "as given"
        return Computed(self.precision, "parameters", dict(counts), note=f"{how}, no autocast")

    def describe(self) -> dict[str, Any]:
        dtype = _DTYPES[self.precision]
        route = {
            "fp32": "float32 weights and inputs"
            + (", TF32 off" if self.device.type == "cuda" else ""),
            "tf32": "float32 weights and inputs, TF32 matmul on",
        }.get(self.precision, f"module.to({dtype}), float inputs cast to {dtype}")
        return {
            **super().describe(),
            "version": self.torch.__version__,
            "device": str(self.device),
            "precision_route": route,
            "forward": self.signature.text,
        }


def _load(torch: Any, path: Path) -> Any:
    """A model file: torch.export.save's (.pt2), else TorchScript (torch.jit.save)."""
    if not path.is_file():
        raise ModelLoadError(f"torch runner: {path} does not exist")
    try:
        if path.suffix.lower() == ".pt2":
            return torch.export.load(str(path))
        return torch.jit.load(str(path), map_location="cpu")
    except (RuntimeError, ValueError, OSError) as exc:
        raise ModelLoadError(
            f"torch runner: {path} is not a TorchScript or torch.export (.pt2) file: "
            f"{str(exc).strip().splitlines()[0]}"
        ) from None


def _takes_no_keywords(exported: Any) -> bool:
    """An ExportedProgram exported with positional inputs only: its module refuses them by
    keyword (one exported with keyword inputs takes those by keyword)."""
    try:
        keywords = exported.call_spec.in_spec.children_specs[1].context
    except (AttributeError, IndexError):
        return False
    return not keywords

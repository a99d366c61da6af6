"""What the ONNX-executing runners share: load, convert to the precision, mark all, specs;
and which IR and opset versions a runtime reads, loading a model whose IR version is newer.

onnx 1.23's `helper.make_model` writes IR 14, which onnxruntime 1.31 refuses although it
runs every op of such a model. When every opset a model imports is one the runtime supports,
the runner loads a copy stamped with the runtime's maximum IR version and says so in
`describe()`; otherwise the error keeps both the model's and the runtime's versions.
onnxruntime has no API for its maximum IR version or opsets: they are read from its own
refusal of a probe model (cached), with a table of known releases as the fallback.
"""

from __future__ import annotations

import copy
import dataclasses
import difflib
import functools
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import onnx
from onnx import helper

from ..errors import ModelLoadError
from .base import Runner, TensorSpec
from .computed import Computed, onnx_computed
from .onnx_graph import graph_input_specs, inferred_bytes, with_all_outputs, with_outputs
from .onnx_model import LoadedModel, load_model
from .precision import convert

#: onnxruntime release (major.minor) -> (max IR version, max opset per domain); the fallback
#: when its refusal of a probe model cannot be parsed.
ORT_TABLE: dict[str, tuple[int, dict[str, int]]] = {
    "1.20": (10, {"": 21, "ai.onnx.ml": 4}),
    "1.21": (10, {"": 22, "ai.onnx.ml": 5}),
    "1.22": (11, {"": 22, "ai.onnx.ml": 5}),
    "1.23": (11, {"": 23, "ai.onnx.ml": 5}),
    "1.31": (13, {"": 26, "ai.onnx.ml": 5}),
}
_PROBE_DOMAINS = ("", "ai.onnx.ml")
_PROBE_VERSION = 1 << 20
_IR_PATTERN = re.compile(r"max supported IR version: (\d+)")
_OPSET_PATTERN = re.compile(r"support for domain (\S+) is till opset (\d+)")


@dataclass(frozen=True)
class RuntimeVersions:
    """What a runtime reads: its name for messages, the max IR version, max opset per domain
    (a domain it does not list is not checked: custom domains belong to their own ops)."""

    runtime: str
    max_ir: int
    opsets: Mapping[str, int]


def _domain(name: str) -> str:
    return "" if name in ("", "ai.onnx") else name


def _shown(domain: str) -> str:
    return domain or "ai.onnx"


def _onnx_release(ir_version: int) -> str:
    """'onnx 1.23' for the first onnx release that writes this IR version ('' if unknown)."""
    for release, ir, *_ in helper.VERSION_TABLE:
        if ir == ir_version:
            return f" (onnx {release.rsplit('.', 1)[0]})"
    return ""


def fit_ir_version(loaded: LoadedModel, versions: RuntimeVersions) -> tuple[LoadedModel, str]:
    """The model as the runtime can load it, and a note when its IR version was lowered.

    ModelLoadError, with both sides' versions, when the IR version is newer than the runtime's
    and an opset is too: lowering the IR stamp would not make such a model loadable."""
    ir_version = int(loaded.proto.ir_version)
    if ir_version <= versions.max_ir:
        return loaded, ""
    opsets = {_domain(o.domain): int(o.version) for o in loaded.proto.opset_import}
    newer = {
        domain: version
        for domain, version in opsets.items()
        if domain in versions.opsets and version > versions.opsets[domain]
    }
    if newer:
        theirs = ", ".join(f"{_shown(d)} opset {v}" for d, v in sorted(newer.items()))
        ours = ", ".join(f"{_shown(d)} opset <= {versions.opsets[d]}" for d in sorted(newer))
        raise ModelLoadError(
            f"model {loaded.source} has IR version {ir_version}{_onnx_release(ir_version)} and "
            f"imports {theirs}; {versions.runtime} reads IR version <= {versions.max_ir} and "
            f"{ours}: export it at a supported opset (or convert it with "
            "onnx.version_converter.convert_version) and save it with "
            f"helper.make_model(..., ir_version={versions.max_ir})"
        )
    lowered = copy.deepcopy(loaded.proto)
    lowered.ir_version = versions.max_ir
    note = (
        f"model IR version {ir_version}{_onnx_release(ir_version)} loaded as IR version "
        f"{versions.max_ir}, the newest {versions.runtime} reads (every opset it imports, "
        f"{', '.join(f'{_shown(d)} {v}' for d, v in sorted(opsets.items()))}, is supported)"
    )
    # the digest keeps conversion caches apart from the model as stamped
    fitted = dataclasses.replace(
        loaded, proto=lowered, digest=f"{loaded.digest}@ir{versions.max_ir}"
    )
    return fitted, note


def _refusal(ort: Any, ir_version: int, domain: str, opset: int) -> str:
    """What onnxruntime says when asked to load an empty model of these versions."""
    graph = helper.make_graph(
        [], "probe", [], [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [1])]
    )
    imports = [helper.make_opsetid("", 17 if domain else opset)]
    if domain:
        imports.append(helper.make_opsetid(domain, opset))
    model = helper.make_model(graph, ir_version=ir_version, opset_imports=imports)
    try:
        ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    except Exception as exc:  # onnxruntime's own pybind exception types
        return str(exc)
    return ""


@functools.cache
def onnxruntime_versions(ort: Any) -> RuntimeVersions:
    """onnxruntime's max IR version and ai.onnx / ai.onnx.ml opsets, read from its refusal
    of probe models; the table of known releases where a refusal does not parse."""
    release = ".".join(ort.__version__.split(".")[:2])
    table_ir, table_opsets = ORT_TABLE.get(release, (0, {}))
    found = _IR_PATTERN.search(_refusal(ort, _PROBE_VERSION, "", 1))
    max_ir = int(found.group(1)) if found else table_ir
    opsets: dict[str, int] = {}
    for domain in _PROBE_DOMAINS:
        refusal = _refusal(ort, max_ir or 3, domain, _PROBE_VERSION)
        match = _OPSET_PATTERN.search(refusal)
        if match and _domain(match.group(1)) == domain:
            opsets[domain] = int(match.group(2))
        elif domain in table_opsets:
            opsets[domain] = table_opsets[domain]
    if not max_ir:  # an unknown release that no longer says it: take the onnx it was built with
        max_ir = onnx.IR_VERSION
    return RuntimeVersions(f"onnxruntime {ort.__version__}", max_ir, opsets)


@functools.cache
def onnx_reference_versions() -> RuntimeVersions:
    """The installed onnx's IR version and opsets (what its reference evaluator implements)."""
    rows = [row for row in helper.VERSION_TABLE if row[1] == onnx.IR_VERSION]
    opsets = {"": onnx.defs.onnx_opset_version()}
    if rows:
        opsets["ai.onnx.ml"] = int(rows[-1][3])
    return RuntimeVersions(
        f"onnx {onnx.__version__}'s reference evaluator", onnx.IR_VERSION, opsets
    )


class OnnxModelRunner(Runner):
    """Base of `onnxrt` and `onnxref`: `self.proto` is the model to execute (converted to the
    precision, every tensor marked an output when `outputs="all"`)."""

    def __init__(self, model: Any, precision: str, outputs: str | Sequence[str] | None) -> None:
        super().__init__(precision)
        self.loaded = load_model(model)
        versions = self._runtime_versions()
        fitted, self.ir_note = (
            (self.loaded, "") if versions is None else fit_ir_version(self.loaded, versions)
        )
        converted = convert(fitted, precision)
        self.route = converted.route
        self.proto: onnx.ModelProto = converted.proto
        if outputs == "all":
            self.proto, self._layers = with_all_outputs(self.proto)
        self._specs = graph_input_specs(self.proto)
        self._requested = list(outputs) if isinstance(outputs, (list, tuple)) else None
        if self._requested is not None:  # Polygraphy's --onnx-outputs NAME: inner tensors too
            self.proto = with_outputs(self.proto, self._requested)
        self._outputs: list[str] = [vi.name for vi in self.proto.graph.output]

    def _runtime_versions(self) -> RuntimeVersions | None:
        """The IR / opset versions the runtime reads (None: load the model as stamped)."""
        return None

    def _restrict_outputs(self, available: list[str]) -> None:
        """Keep the outputs the user asked for (`outputs=[...]`), failing on unknown names."""
        self._outputs = available
        if self._requested is not None:
            unknown = [name for name in self._requested if name not in available]
            if unknown:
                close = difflib.get_close_matches(unknown[0], available, n=1)
                hint = f" (did you mean {close[0]!r}?)" if close else ""
                raise ModelLoadError(
                    f"model {self.loaded.source} has no output(s) {unknown}{hint}; it has "
                    f"{available}"
                )
            self._outputs = self._requested

    def _what_computed(self) -> Computed | None:
        """The model it executes, its nodes by the float type they compute in."""
        return onnx_computed(self.proto, self.precision)

    def input_specs(self) -> list[TensorSpec]:
        return list(self._specs)

    def layer_bytes(self, shapes: Mapping[str, Sequence[int]]) -> dict[str, int]:
        """Shape inference of the model at these input shapes: each layer's bytes where it
        gives a whole shape."""
        if self._layers is None:
            return {}
        return inferred_bytes(self.proto, shapes)

    def output_names(self) -> list[str]:
        return list(self._outputs)

    def describe(self) -> dict[str, Any]:
        info = {
            **super().describe(),
            "precision_route": self.route,
            "model_digest": self.loaded.digest,
        }
        if self.ir_note:
            info["ir_version"] = self.ir_note
        return info

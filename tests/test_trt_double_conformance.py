"""The TensorRT and CUDA doubles, and the runner's use of TensorRT, held to the real bindings.

../shared/tensorrt-api/ holds the real API surface (names, enum values, signatures) of
TensorRT 10.0.1, 10.16.1.11, 11.0.0.114, 11.4.0.106 and cuda-bindings 12.9.10, 13.5.0.
"""

from __future__ import annotations

import ast
import enum
import inspect
import json
import re
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from pytest_trtcompare.runners import cuda as cuda_runner
from pytest_trtcompare.runners import trt_build, trt_io

from .doubles import fake_cuda, fake_tensorrt

API = Path(__file__).resolve().parents[2] / "shared" / "tensorrt-api"
TRT_VERSIONS = ("10.0.1", "10.16.1.11", "11.0.0.114", "11.4.0.106")
RUNNER = Path(trt_io.__file__).parent
pytestmark = pytest.mark.skipif(not API.is_dir(), reason=f"no real API surface at {API}")


@cache
def real(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((API / f"api-{name}.json").read_text())
    return data


def _kind(value: Any) -> str:
    if isinstance(value, property):
        return "property"
    if isinstance(value, type):
        return "class"
    if callable(value):
        return "method"
    return "value"


def _own_members(cls: type) -> dict[str, Any]:
    """Members the double defines itself (not those of object, enum or ctypes)."""
    members: dict[str, Any] = {}
    for klass in reversed(cls.__mro__):
        if klass.__module__.startswith("tests.doubles"):
            members.update(vars(klass))
    public = {"__len__", "__getitem__", "__iter__", "__eq__", "__buffer__"}
    return {k: v for k, v in members.items() if not k.startswith("_") or k in public}


def _short(annotation: str) -> str:
    text = annotation.replace("tensorrt_bindings.tensorrt.", "").replace(" | None", "")
    return text.replace("nvonnxparser::IParserError", "ParserError").strip()


def _real_returns(signatures: list[str]) -> set[str]:
    return {_short(s.rsplit("->", 1)[1]) for s in signatures if "->" in s}


@pytest.mark.parametrize("version", fake_tensorrt.VERSIONS)
def test_every_name_value_and_return_type_of_the_double_is_real(version):
    surface, fake = real(version), fake_tensorrt.module(version)
    assert fake.__version__ == surface["version"] == version
    checked = 0
    for name, value in vars(fake).items():
        if name.startswith("_"):
            continue
        if isinstance(value, type) and issubclass(value, enum.Enum):
            assert name in surface["enums"], f"{version} has no enum {name}"
            members = {m.name: int(m.value) for m in value}
            real_members = {
                k: surface["enums"][name][k] for k in members if k in surface["enums"][name]
            }
            assert members == real_members, f"{version}: {name} differs"
            checked += len(members)
        elif isinstance(value, type):
            assert name in surface["classes"], f"{version} has no class {name}"
            real_members = surface["classes"][name]["members"]
            for member, obj in _own_members(value).items():
                assert member in real_members, f"{version}: {name}.{member} does not exist"
                assert real_members[member]["kind"] == _kind(obj), f"{name}.{member}: kind"
                returns = _real_returns(real_members[member].get("signatures", []))
                annotation = inspect.get_annotations(obj).get("return") if callable(obj) else None
                if returns and annotation and member != "__init__":
                    assert _short(annotation) in returns, f"{name}.{member} -> {annotation}"
                checked += 1
        else:
            assert name in surface["functions"], f"{version} has no function {name}"
            checked += 1
    assert checked > 100


def test_the_real_values_the_old_double_got_wrong():
    ten, eleven = (fake_tensorrt.module(v) for v in fake_tensorrt.VERSIONS)
    assert ten.DataType.BF16 == eleven.DataType.BF16 == 7
    assert ten.NetworkDefinitionCreationFlag.STRONGLY_TYPED == 1
    assert eleven.NetworkDefinitionCreationFlag.STRONGLY_TYPED == 0
    assert not hasattr(eleven.BuilderFlag, "FP16") and not hasattr(eleven.BuilderFlag, "BF16")
    assert real("10.16.1.11")["classes"]["IHostMemory"]["buffer_protocol"]
    plan = fake_tensorrt._engine.host_memory(b"plan")
    assert bytes(memoryview(plan)) == b"plan" and plan.nbytes == 4
    assert not hasattr(plan, "__len__")  # the real IHostMemory has no len() either


def test_objects_of_the_double_keep_their_state_private(monkeypatch):
    from .doubles.trt_fixture import install_doubles
    from .onnx_models import layer_chain

    trt, _cuda = install_doubles(monkeypatch)
    logger = trt.Logger(trt.Logger.WARNING)
    builder = trt.Builder(logger)
    network = builder.create_network(0)
    parser = trt.OnnxParser(network, logger)
    assert parser.parse(layer_chain((4, 4)).SerializeToString())
    config = builder.create_builder_config()
    profile = builder.create_optimization_profile()
    profile.set_shape("x", (1, 4), (1, 4), (2, 4))
    config.add_optimization_profile(profile)
    plan = builder.build_serialized_network(network, config)
    engine = trt.Runtime(logger).deserialize_cuda_engine(plan)
    objects = [logger, builder, network, parser, config, profile, engine]
    objects += [engine.create_execution_context(), network.get_layer(0), network.get_input(0)]
    for obj in objects:
        public = [k for k in vars(obj) if not k.startswith("_")]
        assert not public, f"{type(obj).__name__} has instance attributes {public}"


@pytest.mark.parametrize("version", ["12.9.10", "13.5.0"])
def test_the_cuda_double_is_real_cuda_bindings(version):
    surface = real(f"cuda-bindings-{version}")
    rt = fake_cuda.runtime_module("cudaErrorInsufficientDriver")
    for name, value in vars(rt).items():
        if name.startswith("_"):
            continue
        if isinstance(value, type):
            real_members = surface["enums"][name]
            assert {m.name: int(m) for m in value} == {m.name: real_members[m.name] for m in value}
        else:
            assert surface["functions"][name]["returns"][0].startswith("cudaError_t")
    protocol = {n for n in vars(cuda_runner.CudaApi) if not n.startswith("_")}
    assert protocol <= {n for n in vars(fake_cuda.FakeCuda) if not n.startswith("_")}


# -- the runner's own use of TensorRT and cuda-bindings -------------------------------------
# Receivers in runners/trt*.py and cuda.py, by variable name, and the real class they hold.
RECEIVERS = {
    "builder": "Builder",
    "config": "IBuilderConfig",
    "network": "INetworkDefinition",
    "parser": "OnnxParser",
    "engine": "ICudaEngine",
    "context": "IExecutionContext",
    "runtime": "Runtime",
    "layer": "ILayer",
    "tensor": "ITensor",
    "profile": "IOptimizationProfile",
    "cache": "ITimingCache",
    "error": "ParserError",
    "inspector": "EngineInspector",
}
SOURCES = [*sorted(RUNNER.glob("trt*.py")), RUNNER / "cuda.py"]


def _uses() -> list[tuple[str, str, str]]:
    """(file, receiver, attribute) for every attribute read off a TensorRT or CUDA object."""
    uses = []
    for path in SOURCES:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Attribute):
                receiver = re.sub(r"^self\.", "", ast.unparse(node.value))
                uses.append((path.name, receiver, node.attr))
    return uses


def _exists(surface: dict[str, Any], cuda: dict[str, Any], receiver: str, attr: str) -> bool | None:
    """Whether receiver.attr is real; None where the receiver is no TensorRT / CUDA object."""
    if receiver == "trt":
        return attr == "__version__" or any(attr in surface[k] for k in surface if k != "module")
    if receiver.startswith("trt."):
        name = receiver.split(".")[1]
        return attr in surface["enums"].get(name, {}) or attr in surface["classes"][name]["members"]
    if receiver == "rt":
        return attr in cuda["functions"] or attr in cuda["enums"]
    if receiver == "props":  # cudaGetDeviceProperties' result
        return attr in cuda["classes"]["cudaDeviceProp"]["members"]
    if receiver.startswith("rt."):
        return attr in cuda["enums"][receiver.split(".")[1]]
    if receiver in RECEIVERS:
        return attr in surface["classes"][RECEIVERS[receiver]]["members"]
    return None


@pytest.mark.parametrize("cuda_version", ["12.9.10", "13.5.0"])
@pytest.mark.parametrize("version", TRT_VERSIONS)
def test_every_tensorrt_and_cuda_name_the_runner_uses_is_real(version, cuda_version):
    surface, cuda = real(version), real(f"cuda-bindings-{cuda_version}")
    verdicts = [(u, _exists(surface, cuda, u[1], u[2])) for u in _uses()]
    checked = [u for u, ok in verdicts if ok is not None]
    missing = [f"{f}: {r}.{a}" for (f, r, a), ok in verdicts if ok is False]
    assert not missing, f"not in TensorRT {version} / cuda-bindings {cuda_version}: {missing}"
    assert len(checked) > 80


@pytest.mark.parametrize("version", TRT_VERSIONS)
def test_names_the_runner_looks_up_by_string_are_real_or_guarded(version):
    surface = real(version)
    layer_types, data_types = surface["enums"]["LayerType"], surface["enums"]["DataType"]
    for name in trt_build.SUBGRAPH_START + trt_build.SUBGRAPH_END + trt_build.NOT_MARKED:
        assert name in layer_types
    assert set(trt_io.TRT_TO_NUMPY) | set(trt_io.TRT_TO_ML_DTYPES) <= set(data_types)
    # refused by name, so they may be missing in older versions (10.0.1 has no FP4 / E8M0)
    assert set(data_types) <= set(trt_io.TRT_TO_NUMPY) | set(trt_io.TRT_TO_ML_DTYPES) | set(
        trt_io.TRT_REFUSED
    )
    assert "TF32" in surface["enums"]["BuilderFlag"]
    weak = {"FP16", "BF16"} & set(surface["enums"]["BuilderFlag"])
    assert weak == (set() if version.startswith("11.") else {"FP16", "BF16"})
    # ... which the runner reads only through getattr, never as an attribute
    assert not [u for u in _uses() if u[1] == "trt.BuilderFlag" and u[2] in ("FP16", "BF16")]

"""Models no one here wrote (issue 22, item 8): Hugging Face BertModel, GPT2LMHeadModel and
LlamaForCausalLM, timm's ViT and torchvision's resnet18 and mobilenet_v3_small, small and
seeded, exported with torch.onnx.export, through every feature a user reaches for: the torch
twin against onnxrt at fp32 / fp16 / bf16, the raw torch target with shapes keyed by forward
names, per-layer comparison (ONNX against ONNX, torch against ONNX), goldens and isolation.

The ONNX exports are made once per session (tests/zoo/conftest.py); the models are built in
this process before any pytester run, so their libraries are imported once."""

from __future__ import annotations

import json

import numpy as np
import pytest

from .torchvision_ops import install

install()  # before anything imports torchvision (transformers and timm do)
pytest.importorskip("transformers")
pytest.importorskip("timm")
pytest.importorskip("torchvision", exc_type=ImportError)

from pytest_trtcompare import runners  # noqa: E402
from pytest_trtcompare.session.layer_runs import compare_layers  # noqa: E402
from pytest_trtcompare.session.module_pairs import TorchLayers  # noqa: E402
from pytest_trtcompare.session.runs import make_feeds  # noqa: E402
from pytest_trtcompare.session.spec import layer_pairs  # noqa: E402

from ..pytester_helpers import XDIST_SLOW as XDIST  # noqa: E402
from ..pytester_helpers import glob_escape, library_says, run  # noqa: E402
from . import models  # noqa: E402

ENTRIES = {name: models.build(name) for name in models.NAMES}

HEADER = """
import pytest
from tests.zoo.models import build

ZOO = {zoo!r}
"""


def marked(name: str, zoo_path: str, body: str = "pass", **arguments: str) -> str:
    """A compare_frameworks test of one zoo model (its twin under models=)."""
    entry = ENTRIES[name.removesuffix("_legacy")]
    args = ", ".join(f"{key}={value}" for key, value in arguments.items())
    return f"""
@pytest.mark.compare_frameworks(model=ZOO + "/{name}.onnx", {args})
@pytest.mark.shapes({entry.shapes!r})
def test_{name}(comparison):
    {body}
"""


def twin(name: str) -> str:
    return f'{{"torch": build("{name.removesuffix("_legacy")}").module}}'


@pytest.mark.slow  # 20 s and more of a core: run by -m slow (the test command's budget)
@pytest.mark.parametrize("xdist", XDIST)
def test_every_architecture_as_a_twin_of_its_export_at_every_precision(zoo, zoo_pytester, xdist):
    """torch (fp32, fp16, bf16: real low-precision kernels) against onnxrt fp32, each model at
    its precision's default tolerance; the reference evaluator on what it can run."""
    source = HEADER.format(zoo=str(zoo.folder))
    for name in models.NAMES:
        zoo.onnx(name)
        frameworks = (
            '["onnxrt", "torch", "onnxref"]'
            if name in ("gpt2", "bert")
            else ('["onnxrt", "torch"]')
        )
        source += marked(name, "", frameworks=frameworks, models=twin(name))
    zoo_pytester.makepyfile(test_twins=source)
    from onnx.reference import ReferenceEvaluator

    bert = ReferenceEvaluator(str(zoo.onnx("bert")))
    feed = {name: np.ones((2, 8), np.int64) for name in ("input_ids", "attention_mask")}
    reference_says = library_says(lambda: bert.run(None, feed))  # its words, whatever they are
    result = run(zoo_pytester, "-rA", "--trt-precision=fp32,fp16,bf16", *xdist)
    # 6 torch twins x 3 precisions, and onnxref on GPT-2 (3); onnx.reference's own
    # GatherElements cannot run the BERT export: one message, no traceback
    result.assert_outcomes(passed=21, errors=3)
    result.stdout.fnmatch_lines_random(
        [
            "*PASSED test_twins.py::test_llama[[]torch-bf16-bs2[]]*",
            "*PASSED test_twins.py::test_gpt2[[]onnxref-fp16-bs2[]]*",
            "ERROR test_twins.py::test_bert[[]onnxref-fp32-bs2[]] - Failed: InferenceError: *",
            "InferenceError: onnxref-fp32 failed running the model on input_ids: int64[[]2, 8[]], "
            "attention_mask: int64[[]2, 8[]]: node 'node_gather' (GatherElements): "
            f"{glob_escape(reference_says)}*",
        ]
    )
    assert "Traceback" not in result.stdout.str()
    assert "pytest_trtcompare/" not in result.stdout.str()


@pytest.mark.parametrize("xdist", XDIST)
def test_raw_torch_targets_take_shapes_by_forward_names(zoo_pytester, xdist):
    """frameworks=["torch"]: each precision against torch fp32; input_ids are int64 from the
    model's own annotations, in [0, vocab_size) from its config; attention_mask is an
    optional parameter fed because the shapes name it."""
    source = HEADER.format(zoo="")
    for name in models.NAMES:
        source += f"""
@pytest.mark.compare_frameworks(model=build("{name}").module, frameworks=["torch"])
@pytest.mark.shapes({ENTRIES[name].shapes!r})
def test_{name}(comparison):
    pass
"""
    source += """
@pytest.mark.compare_frameworks(model=build("bert").module, frameworks=["torch"])
@pytest.mark.shapes({"input_ids": (2, 8), "attention_maks": (2, 8)})
def test_a_misspelt_parameter():
    pass
"""
    zoo_pytester.makepyfile(test_torch=source)
    result = run(zoo_pytester, "-rA", "--trt-precision=fp32,fp16,bf16", *xdist)
    result.assert_outcomes(passed=18, errors=3)
    result.stdout.fnmatch_lines(
        [
            "InputDataError: shapes name input(s) [[]'attention_maks'[]] that forward(input_ids="
            "None, *attention_mask=None*) does not name; it names input_ids,*",
            "*attention_mask*",  # the message wraps at the terminal's width
        ]
    )


LAYER_COUNTS = {  # (torch module outputs compared with an ONNX tensor, modules without one)
    "bert": (26, 5),
    "gpt2": (21, 5),
    "llama": (25, 2),
    "resnet18": (40, 20),
    "resnet18_legacy": (40, 20),
    "mobilenet_v3_small": (121, 35),
    "vit_tiny": (100, 138),
}


@pytest.mark.parametrize("name", sorted(LAYER_COUNTS))
def test_torch_modules_match_their_onnx_tensors(zoo, name):
    """Every module matched to an export tensor agrees at fp32: a wrong match would differ."""
    path = zoo.onnx(name)
    reference = runners.create("onnxrt", path, outputs="all")
    target = TorchLayers(
        runners.create("torch", ENTRIES[name.removesuffix("_legacy")].module, outputs="all"),
        reference,
        reference.loaded.proto,
    )
    feed = make_feeds(reference, shapes=ENTRIES[name.removesuffix("_legacy")].shapes)[0]
    result = compare_layers(target, reference, feed, atol=1e-4, rtol=1e-4)
    assert result.passed, result.report()
    assert (len(result.outputs), len(target.unmatched_layers)) == LAYER_COUNTS[name]


def test_both_exporters_give_the_same_modules_their_tensors(zoo):
    """The legacy exporter's node names and the dynamo exporter's name_scopes, with its
    BatchNorm folded into the Conv before it, reach the same resnet18 modules."""
    matched = {}
    for name in ("resnet18", "resnet18_legacy"):
        reference = runners.create("onnxrt", zoo.onnx(name), outputs="all")
        target = TorchLayers(
            runners.create("torch", ENTRIES["resnet18"].module, outputs="all"),
            reference,
            reference.loaded.proto,
        )
        target.discover_layers(make_feeds(reference, shapes={"x": (1, 3, 32, 32)})[0])
        matched[name] = set(target.module_of.values())
    assert matched["resnet18"] == matched["resnet18_legacy"]
    assert {"layer1.0.bn1", "layer1.0.relu", "layer1.0.relu#2", "fc"} <= matched["resnet18"]


@pytest.mark.slow  # 20 s and more of a core: run by -m slow (the test command's budget)
@pytest.mark.parametrize("xdist", XDIST)
def test_per_layer_torch_against_onnx_names_the_module_that_diverges(zoo, zoo_pytester, xdist):
    """outputs="all" with a torch twin: modules matched to export tensors, compared layer by
    layer; a module changed in the twin is the first divergence, named both ways."""
    folder = str(zoo.folder)
    zoo.onnx("resnet18_legacy")
    zoo.onnx("gpt2")
    zoo_pytester.makepyfile(
        test_layers=HEADER.format(zoo=folder)
        + """
import torch

def planted():
    module = build("resnet18").module
    with torch.no_grad():
        module.layer2[0].bn2.bias += 0.5  # the twin differs from the export from here on
    return module
"""
        + marked(
            "resnet18_legacy",
            folder,
            frameworks='["onnxrt", "torch"]',
            models='{"torch": planted()}',
            outputs='"all"',
        )
        + marked(
            "gpt2",
            folder,
            frameworks='["onnxrt", "torch"]',
            models=twin("gpt2"),
            outputs='"all"',
            layers='"report"',
        )
        + marked(
            "mobilenet_v3_small",
            folder,
            frameworks='["onnxrt", "onnxref"]',
            outputs='"all"',
            layers='"report"',
        )
    )
    zoo.onnx("mobilenet_v3_small")
    result = run(zoo_pytester, "-rA", "--trt-precision=fp32,fp16", *xdist)
    result.assert_outcomes(passed=4, failed=2)
    result.stdout.fnmatch_lines(
        [
            "first divergence (topological order): /layer2/layer2.0/conv2/Conv (Conv) = torch "
            "layer2.0.bn2, layer 14 of 40",
        ]
    )
    result.stdout.fnmatch_lines(  # the legacy export folded each BatchNorm into its Conv
        ["torch module outputs with no ONNX counterpart (not compared): conv1, layer1.0.conv1,*"]
    )


def test_outputs_all_is_refused_for_pairs_it_cannot_match(pytester):
    pytester.makepyfile(
        """
        import pytest

        def identity(feed):
            return dict(feed)

        @pytest.mark.compare_frameworks(model="m.onnx", frameworks=["onnxrt", "callable"],
                                        models={"callable": identity}, outputs="all")
        def test_callable_layers():
            pass
        """
    )
    result = pytester.runpytest()
    result.assert_outcomes(errors=1)
    assert (
        "test_callable_layers: @pytest.mark.compare_frameworks(outputs='all') cannot match "
        f"the layers of callable with those of onnxrt; per-layer comparison pairs {layer_pairs()}"
    ) in result.stdout.str().replace("\n  ", " ")  # the error at setup wraps, indented
    assert layer_pairs().startswith("onnxrt, onnxref, openvino and trt with each other")


@pytest.mark.parametrize("xdist", XDIST)
def test_goldens_of_raw_torch_targets_and_twins(zoo, zoo_pytester, xdist):
    """golden=True on the raw torch target and on a twin (fed as its export is: int64 ids):
    missing fails (nothing written), --trt-update-goldens writes one golden per item, the rerun
    passes against them; onnxrt at bf16 skips before looking for its golden."""
    source = HEADER.format(zoo=str(zoo.folder))
    zoo.onnx("bert")
    source += marked(
        "bert", "", frameworks='["onnxrt", "torch"]', models=twin("bert"), golden="True"
    )
    for name in ("gpt2", "vit_tiny"):
        source += f"""
@pytest.mark.compare_frameworks(model=build("{name}").module, frameworks=["torch"], golden=True)
@pytest.mark.shapes({ENTRIES[name].shapes!r})
def test_golden_{name}():
    pass
"""
    zoo_pytester.makepyfile(test_goldens=source)
    first = run(zoo_pytester, "-rfs", "--trt-precision=fp32,bf16", *xdist)
    first.assert_outcomes(failed=7, skipped=1)
    first.stdout.fnmatch_lines_random(
        [
            "*test_golden_gpt2*bf16*.safetensors does not exist (nothing was*",
            "*onnxruntime CPU has no bfloat16 kernel for *",
        ]
    )
    written = run(zoo_pytester, "--trt-update-goldens", "--trt-precision=fp32,bf16", *xdist)
    written.assert_outcomes(passed=7, skipped=1)
    goldens = sorted(p.name for p in (zoo_pytester.path / "goldens").rglob("*.safetensors"))
    assert len(goldens) == 7 and "test_bert[torch-bf16-bs2].safetensors" in goldens
    again = run(zoo_pytester, "--trt-precision=fp32,bf16", *xdist)
    again.assert_outcomes(passed=7, skipped=1)


@pytest.mark.parametrize("xdist", XDIST)
def test_isolated_twins_keep_their_dtypes(zoo, zoo_pytester, xdist):
    """--trt-isolate: a Hugging Face twin unpickled in a worker process, int64 ids in
    and bfloat16 logits out, compared as in-process."""
    source = HEADER.format(zoo=str(zoo.folder))
    zoo.onnx("llama")
    source += marked("llama", "", frameworks='["onnxrt", "torch"]', models=twin("llama"))
    zoo_pytester.makepyfile(test_isolated=source)
    result = run(
        zoo_pytester,
        "--trt-isolate",
        "--trt-precision=fp32,bf16",
        "--trt-report=r.json",
        *xdist,
    )
    result.assert_outcomes(passed=2)
    report = json.loads((zoo_pytester.path / "r.json").read_text())
    (output,) = [o for o in report["outputs"] if o["test"].endswith("[torch-bf16-bs2]")]
    described = report["runners"][output["target_runner"]]
    assert described["runner"] == "torch-bf16"
    assert described["isolated"] is True and "bfloat16" in described["precision_route"]
    assert 0 < output["max_abs_error"] < 0.05  # bfloat16 numbers, not float32 in disguise


def test_token_ids_stay_in_the_embedding_table(zoo):
    """int64 ids drawn from the rows of the table they index (read from the export), masks
    from the integer default."""
    reference = runners.create("onnxrt", zoo.onnx("gpt2"))
    specs = {spec.name: spec for spec in reference.input_specs()}
    assert specs["input_ids"].value_range == (0, models.VOCAB - 1)
    assert specs["attention_mask"].value_range is None
    bert = runners.create("torch", ENTRIES["bert"].module)  # Hugging Face: from its config
    (token_types,) = bert.specs_for(["token_type_ids"])
    assert token_types.dtype == "int64" and token_types.value_range == (0, 1)
    feed = make_feeds(reference, shapes={"input_ids": (64, 64), "attention_mask": (64, 64)})[0]
    assert feed["input_ids"].dtype == np.int64 and feed["input_ids"].max() > 100
    assert feed["input_ids"].max() < models.VOCAB


def test_a_real_cache_flattens_per_layer_keys_and_values():
    """GPT-2 with use_cache=True returns a transformers cache beside its logits."""
    module = ENTRIES["gpt2"].module
    runner = runners.create("torch", module)
    feed = {"input_ids": np.arange(8, dtype=np.int64).reshape(1, 8), "use_cache": np.True_}
    names = list(runner.infer(feed))
    field = names[1].split(".")[0]  # "cache" (transformers 5.24) or "past_key_values"
    assert names == ["logits"] + [
        f"{field}.{layer}.{part}" for layer in range(2) for part in ("key", "value")
    ]


def test_an_encoder_decoder_cache_flattens_and_non_tensors_can_be_left_out():
    """T5 returns an EncoderDecoderCache by default: its self- and cross-attention caches
    flatten like any cache; an output the test leaves out with outputs= is never read."""
    import torch
    import transformers as hf

    torch.manual_seed(0)
    config = hf.T5Config(vocab_size=64, d_model=32, d_kv=8, d_ff=64, num_layers=2, num_heads=2)
    t5 = hf.T5Model(config).eval()
    feed = {
        "input_ids": np.arange(10, dtype=np.int64).reshape(2, 5),
        "decoder_input_ids": np.arange(6, dtype=np.int64).reshape(2, 3),
    }
    names = list(runners.create("torch", t5).infer(feed))
    assert names[0] == "last_hidden_state" and names[-1] == "encoder_last_hidden_state"
    assert "cache.self_attention_cache.1.value" in names
    assert "cache.cross_attention_cache.0.key" in names
    only = runners.create("torch", t5, outputs=["last_hidden_state"]).infer(feed)
    assert list(only) == ["last_hidden_state"]


def test_input_names_that_are_forward_parameters_bind_by_keyword():
    """input_names=["input_ids", "attention_mask"] on GPT-2, whose second positional
    parameter is past_key_values, and ["input_ids", "token_type_ids"] on BERT, whose second
    is attention_mask: each name reaches its parameter (issue 35, item 4)."""
    import torch

    ids = np.arange(16, dtype=np.int64).reshape(2, 8) % models.VOCAB
    mask = np.ones((2, 8), np.int64)
    mask[1, 5:] = 0
    gpt2 = ENTRIES["gpt2"].module
    runner = runners.create("torch", gpt2, input_names=["input_ids", "attention_mask"])
    got = runner.infer({"input_ids": ids, "attention_mask": mask})
    with torch.no_grad():
        logits = gpt2(input_ids=torch.from_numpy(ids), attention_mask=torch.from_numpy(mask))
    np.testing.assert_array_equal(got["logits"], logits.logits.numpy())
    bert = ENTRIES["bert"].module
    types = np.ones((2, 8), np.int64)
    runner = runners.create("torch", bert, input_names=["input_ids", "token_type_ids"])
    got = runner.infer({"input_ids": ids, "token_type_ids": types})
    with torch.no_grad():
        out = bert(input_ids=torch.from_numpy(ids), token_type_ids=torch.from_numpy(types))
    np.testing.assert_array_equal(got["pooler_output"], out.pooler_output.numpy())
    without = bert(input_ids=torch.from_numpy(ids)).pooler_output.detach().numpy()
    assert not np.array_equal(got["pooler_output"], without)  # the types reached the model

"""The zoo: six architectures from Hugging Face transformers, timm and torchvision, in small
configurations with seeded random weights, and their ONNX exports.

`build(name)` returns the torch module (eval mode, the same weights on every call) and the
feed shapes its export was made for; `export(name, folder)` writes `<name>.onnx` with
`torch.onnx.export` as a user would: the default (dynamo) exporter, input names of the
forward's parameters, output names of the model's outputs, dynamic batch (and sequence).
`resnet18_legacy` is resnet18 through the legacy TorchScript exporter (`dynamo=False`),
whose node names carry the module scopes.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .torchvision_ops import install

install()

VOCAB = 128
TEXT = ("bert", "gpt2", "llama")
VISION = ("resnet18", "mobilenet_v3_small", "vit_tiny")
NAMES = TEXT + VISION


@dataclass(frozen=True)
class Entry:
    module: Any
    shapes: dict[str, tuple[int, ...]]  # the shapes of the feed the tests use
    outputs: tuple[str, ...]  # output names of the export (the model's own field names)


def build(name: str) -> Entry:
    import torch

    torch.manual_seed(0)
    base = name.removesuffix("_legacy")
    if base in TEXT:
        shapes = {"input_ids": (2, 8), "attention_mask": (2, 8)}
        outputs = ("last_hidden_state", "pooler_output") if base == "bert" else ("logits",)
        return Entry(_text_model(base), shapes, outputs)
    return Entry(_vision_model(base), {"x": (2, 3, 32, 32)}, ("logits",))


def _text_model(name: str) -> Any:
    import transformers as hf

    small = {"vocab_size": VOCAB, "max_position_embeddings": 64, "use_cache": False}
    if name == "bert":
        config = hf.BertConfig(
            hidden_size=64,
            num_hidden_layers=2,
            num_attention_heads=2,
            intermediate_size=128,
            **small,
        )
        return hf.BertModel(config).eval()
    if name == "gpt2":
        config = hf.GPT2Config(
            n_embd=64,
            n_layer=2,
            n_head=2,
            n_positions=64,
            vocab_size=VOCAB,
            use_cache=False,
            bos_token_id=0,
            eos_token_id=0,
        )
        return hf.GPT2LMHeadModel(config).eval()
    config = hf.LlamaConfig(
        hidden_size=64,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=2,
        intermediate_size=128,
        **small,
    )
    return hf.LlamaForCausalLM(config).eval()


def _vision_model(name: str) -> Any:
    if name == "vit_tiny":
        import timm

        return timm.create_model(
            "vit_tiny_patch16_224", pretrained=False, img_size=32, patch_size=8, num_classes=10
        ).eval()
    import torchvision

    factory = getattr(torchvision.models, name)
    return factory(num_classes=10).eval()


def export(name: str, folder: Path) -> Path:
    """`<folder>/<name>.onnx`, exported as a user would."""
    import torch

    entry = build(name)
    makers = {
        "input_ids": lambda shape: torch.randint(0, VOCAB, shape),
        "attention_mask": lambda shape: torch.ones(shape, dtype=torch.int64),
        "x": torch.rand,
    }
    feed = {key: makers[key](shape) for key, shape in entry.shapes.items()}
    dims = {key: ({0: "batch", 1: "seq"} if key != "x" else {0: "batch"}) for key in feed}
    path = folder / f"{name}.onnx"
    legacy = name.endswith("_legacy")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(
            entry.module,
            (),
            str(path),
            kwargs=feed,
            input_names=list(feed),
            output_names=list(entry.outputs),
            dynamo=not legacy,
            dynamic_shapes=None if legacy else dims,
            dynamic_axes=dims if legacy else None,
        )
    return path

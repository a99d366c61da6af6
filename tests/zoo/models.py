"""The zoo: architectures from Hugging Face transformers, timm and torchvision, in small
configurations with seeded random weights, and their ONNX exports.

`build(name)` returns the torch module (eval mode, the same weights on every call) and the
feed shapes its export was made for; `export(name, folder)` writes `<name>.onnx` with
`torch.onnx.export` as a user would: the default (dynamo) exporter, input names of the
forward's parameters, output names of the model's outputs, dynamic batch (and sequence).
`resnet18_legacy` is resnet18 through the legacy TorchScript exporter (`dynamo=False`),
whose node names carry the module scopes.

The second shelf (`MORE`, issue 35) holds what users bring beyond classifiers and decoders:
torchvision's Faster R-CNN (a small backbone; NMS inside `If` subgraphs, exported by the
legacy exporter as torchvision documents it), CLIP (two modalities: ids and pixels in,
eight outputs), Whisper (an encoder-decoder on float features; the legacy exporter cannot
export `aten::diff`, so the dynamo one), and LLaMA exported inside a wrapper module that
returns `.logits`, compared with the LLaMA model itself (the twin is not the exported
module: matched through the wrapper's prefix).

Two shelves stand apart, kept out of the tests over the others (every exporter and runner on
each) and used by the reduction's measurements (issue 48, bench/bench_reduce.py): `WINDOWED`,
timm's Swin Transformer, and `DETECTION`, Hugging Face's DETR (`DetrForObjectDetection`: a
small ResNet backbone built by transformers, not timm, no pretrained weights; a transformer
encoder and decoder; outputs `logits`, `pred_boxes` and the decoder's and encoder's last
hidden states), its weights transformers' own init under the seed. Unlike Faster R-CNN's
random backbone, whose values fall to 1e-9 so that its export fails at fp16 as it is (the
RPN's TopK), DETR's export passes at fp16 under the default tolerance, so a fault planted in
it is the only fp16 failure.
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
MORE = ("fasterrcnn", "clip", "whisper", "wrapped_llama")
#: The third shelf (issue 45): where features meet. timm's MobileNetV3 (BatchNormAct2d, a
#: BatchNorm subclass with its activation inside, which both exporters fold into the Conv
#: before it) with its norms' statistics randomized as training leaves them, exported by each
#: exporter; an LSTM and a GRU on a dynamic sequence; resnet18's export quantized to int8
#: (QDQ, onnxruntime.quantization) against the float model; a TorchScript `while` exported as
#: a Loop and a torch.cond exported as an If, whose iteration and branch follow the input.
MEET = ("mobilenetv3", "mobilenetv3_legacy", "lstm", "gru", "qdq_resnet18", "loop", "cond")
#: The fourth shelf (issue 48): timm's Swin Transformer (shifted windows: a relative position
#: bias, a shift mask, window partitions as Reshape / Transpose / Pad), 64x64 images, the
#: dynamo export with a dynamic batch. A shelf of its own, so that the tests over the others
#: (every exporter and runner on each) keep their cost; the reduction's measurements use it.
WINDOWED = ("swin",)
#: The fifth shelf (issue 48): Hugging Face's DETR (a ResNet backbone of basic blocks, then a
#: transformer encoder over its 2x2 feature map and a decoder of 8 object queries), 64x64
#: images, the dynamo export with a dynamic batch. A detection model whose export passes at
#: fp16 as it is (Faster R-CNN's does not); a shelf of its own as Swin's is.
DETECTION = ("detr",)
DETR_OUTPUTS = ("logits", "pred_boxes", "last_hidden_state", "encoder_last_hidden_state")
#: how each of MORE is exported: the exporter users reach for that works on it
LEGACY = ("fasterrcnn", "clip", "wrapped_llama", "lstm", "loop")
CLIP_OUTPUTS = (
    "logits_per_image",
    "logits_per_text",
    "text_embeds",
    "image_embeds",
    "text_model_output.last_hidden_state",
    "text_model_output.pooler_output",
    "vision_model_output.last_hidden_state",
    "vision_model_output.pooler_output",
)


@dataclass(frozen=True)
class Entry:
    module: Any
    shapes: dict[str, tuple[int, ...]]  # the shapes of the feed the tests use
    outputs: tuple[str, ...]  # output names of the export (the model's own field names)


def build(name: str) -> Entry:
    import torch

    torch.manual_seed(0)
    base = name.removesuffix("_legacy")
    if base in MORE:
        return _more(base)
    if base in MEET:
        return _meet(base)
    if base in WINDOWED:
        return Entry(_swin(), {"x": (2, 3, 64, 64)}, ("logits",))
    if base in DETECTION:
        return Entry(_detr(), {"pixel_values": (2, 3, 64, 64)}, DETR_OUTPUTS)
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


def _swin() -> Any:
    """timm's Swin-T layout shrunk: 4x4 patches of a 64x64 image, windows of 4x4 (stage 1:
    16x16 tokens in 16 windows, shifted every second block), two stages of two blocks."""
    import timm

    return timm.create_model(
        "swin_tiny_patch4_window7_224",
        pretrained=False,
        img_size=64,
        window_size=4,
        embed_dim=24,
        depths=(2, 2),
        num_heads=(2, 4),
        num_classes=10,
    ).eval()


def _detr() -> Any:
    """DETR shrunk: a ResNet of one basic block per stage (16 to 128 channels, stride 32: a 2x2
    map of a 64x64 image), d_model 32, two encoder and two decoder layers of two heads, 8
    queries, 3 labels; the weights are transformers' own init (post_init) under the seed."""
    import transformers as hf

    backbone = hf.ResNetConfig(
        embedding_size=16,
        hidden_sizes=[16, 32, 64, 128],
        depths=[1, 1, 1, 1],
        layer_type="basic",
        out_features=["stage4"],
    )
    config = hf.DetrConfig(
        use_timm_backbone=False,
        backbone_config=backbone,
        use_pretrained_backbone=False,
        num_queries=8,
        d_model=32,
        encoder_layers=2,
        decoder_layers=2,
        encoder_attention_heads=2,
        decoder_attention_heads=2,
        encoder_ffn_dim=64,
        decoder_ffn_dim=64,
        num_labels=3,
        auxiliary_loss=False,
    )
    return hf.DetrForObjectDetection(config).eval()


def _more(name: str) -> Entry:
    import transformers as hf

    if name == "fasterrcnn":
        return Entry(_faster_rcnn(), {"images": (1, 3, 64, 64)}, ("boxes", "labels", "scores"))
    if name == "clip":
        text = {"vocab_size": VOCAB, "max_position_embeddings": 16, "eos_token_id": 1}
        config = hf.CLIPConfig(
            text_config={**_TINY, **text, "bos_token_id": 0, "pad_token_id": 1},
            vision_config={**_TINY, "image_size": 32, "patch_size": 8},
            projection_dim=16,
        )
        shapes = {"input_ids": (2, 8), "pixel_values": (2, 3, 32, 32), "attention_mask": (2, 8)}
        return Entry(hf.CLIPModel(config).eval(), shapes, CLIP_OUTPUTS)
    if name == "whisper":
        config = hf.WhisperConfig(
            vocab_size=VOCAB,
            num_mel_bins=16,
            d_model=32,
            encoder_layers=2,
            decoder_layers=2,
            encoder_attention_heads=2,
            decoder_attention_heads=2,
            encoder_ffn_dim=64,
            decoder_ffn_dim=64,
            max_source_positions=16,
            max_target_positions=32,
            use_cache=False,
            pad_token_id=0,
            bos_token_id=1,
            eos_token_id=2,
            decoder_start_token_id=1,
        )
        shapes = {"input_features": (2, 16, 32), "decoder_input_ids": (2, 6)}
        outputs = ("last_hidden_state", "encoder_last_hidden_state")
        return Entry(hf.WhisperModel(config).eval(), shapes, outputs)
    shapes = {"input_ids": (2, 8), "attention_mask": (2, 8)}
    return Entry(_text_model("llama"), shapes, ("logits",))


def _meet(name: str) -> Entry:
    import torch

    if name == "mobilenetv3":
        import timm

        model = timm.create_model("mobilenetv3_small_050", pretrained=False, num_classes=10)
        return Entry(trained_norms(model).eval(), {"x": (2, 3, 32, 32)}, ("logits",))
    if name in ("lstm", "gru"):
        return Entry(_recurrent(getattr(torch.nn, name.upper())).eval(), {"x": (2, 7, 6)}, ("y",))
    if name == "qdq_resnet18":  # the float model; its export is quantized (export())
        return Entry(_vision_model("resnet18"), {"x": (2, 3, 32, 32)}, ("logits",))
    if name == "loop":
        return Entry(_loop().eval(), {"x": (2, 8)}, ("y",))
    return Entry(_cond().eval(), {"x": (2, 8)}, ("y",))


def trained_norms(model: Any, seed: int = 0) -> Any:
    """Every batch norm's running statistics and affine parameters drawn as training leaves
    them (mean not 0, variance not 1): random weights keep the defaults, under which folding
    a norm into its Conv changes nothing and a mismatched pairing would go unseen."""
    import torch

    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for module in model.modules():
            if isinstance(module, torch.nn.modules.batchnorm._BatchNorm):
                size = module.num_features
                module.running_mean.copy_(torch.rand(size, generator=generator) - 0.5)
                module.running_var.copy_(torch.rand(size, generator=generator) + 0.5)
                module.weight.copy_(torch.rand(size, generator=generator) + 0.5)
                module.bias.copy_(torch.rand(size, generator=generator) - 0.5)
    return model


def _recurrent(cell: Any) -> Any:
    import torch

    class Recurrent(torch.nn.Module):
        """A sequence model: features in, an RNN over time, a head per step."""

        def __init__(self) -> None:
            super().__init__()
            self.embed = torch.nn.Linear(6, 16)
            self.rnn = cell(16, 16, num_layers=2, batch_first=True)
            self.head = torch.nn.Linear(16, 4)

        def forward(self, x: Any) -> Any:
            steps, _ = self.rnn(torch.tanh(self.embed(x)))
            return self.head(steps)

    return Recurrent()


def _loop() -> Any:
    """A TorchScript `while` whose trip count follows the input: exported as an ONNX Loop."""
    import torch

    class Loop(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.lin = torch.nn.Linear(8, 8)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            steps = 1 + (x.mean() > 0.5).long() * 2  # 1 or 3 iterations
            i = torch.zeros((), dtype=torch.long)
            while bool(i < steps):
                x = torch.tanh(self.lin(x))
                i = i + 1
            return x

    return Loop()


def _cond() -> Any:
    """torch.cond on the input's mean: exported as an ONNX If."""
    import torch

    class Cond(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.lin = torch.nn.Linear(8, 8)
            self.scale = torch.nn.Parameter(torch.tensor(1.5))

        def forward(self, x: Any) -> Any:
            x = self.lin(x)
            return torch.cond(x.mean() > 0, lambda t: t * self.scale, lambda t: torch.sin(t), (x,))

    return Cond()


_TINY = {
    "hidden_size": 32,
    "intermediate_size": 64,
    "num_hidden_layers": 2,
    "num_attention_heads": 2,
}


def _faster_rcnn() -> Any:
    """torchvision's Faster R-CNN on a MobileNetV3-small FPN backbone, 64x64 images, small
    anchors and box head; scores kept from 0 so that random weights still give boxes."""
    from torchvision.models.detection import FasterRCNN
    from torchvision.models.detection.anchor_utils import AnchorGenerator
    from torchvision.models.detection.backbone_utils import mobilenet_backbone
    from torchvision.models.detection.faster_rcnn import FastRCNNPredictor, TwoMLPHead

    from .torchvision_ops import detection_ops

    detection_ops()
    backbone = mobilenet_backbone(
        backbone_name="mobilenet_v3_small", weights=None, fpn=True, trainable_layers=6
    )
    return FasterRCNN(
        backbone,
        num_classes=None,
        rpn_anchor_generator=AnchorGenerator(((16,), (32,), (64,)), ((0.5, 1.0, 2.0),) * 3),
        min_size=64,
        max_size=64,
        box_head=TwoMLPHead(backbone.out_channels * 49, 64),
        box_predictor=FastRCNNPredictor(64, 3),
        box_score_thresh=0.0,
    ).eval()


def _wrapped(model: Any) -> Any:
    """What users export: the model inside a module that returns only `.logits`."""
    import torch

    class Wrapper(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.model = model

        def forward(self, input_ids: Any, attention_mask: Any) -> Any:
            return self.model(input_ids=input_ids, attention_mask=attention_mask).logits

    return Wrapper()


def export(name: str, folder: Path) -> Path:
    """`<folder>/<name>.onnx`, exported as a user would."""
    import torch

    entry = build(name)
    makers = {
        "input_ids": lambda shape: torch.randint(0, VOCAB, shape),
        "decoder_input_ids": lambda shape: torch.randint(0, VOCAB, shape),
        "attention_mask": lambda shape: torch.ones(shape, dtype=torch.int64),
    }
    feed = {key: makers.get(key, torch.rand)(shape) for key, shape in entry.shapes.items()}
    dims = {key: {0: "batch", 1: "seq"} if key in makers else {0: "batch"} for key in feed}
    if name in ("fasterrcnn", "cond"):
        dims = {}  # one image of a fixed size, as torchvision exports it; one shape for cond
    path = folder / f"{name}.onnx"
    legacy = name.endswith("_legacy") or name in LEGACY
    module = _wrapped(entry.module) if name.startswith("wrapped_") else entry.module
    if name in ("lstm", "gru"):
        dims = {"x": {0: "batch", 1: "steps"}}
    if name == "loop":
        module = torch.jit.script(module)  # the while loop stays a loop
        dims = {}
    if name == "qdq_resnet18":
        return _quantized(module, feed["x"], path)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(
            module,
            (feed["images"],) if name == "fasterrcnn" else (),  # forward(images, targets=None)
            str(path),
            kwargs=None if name == "fasterrcnn" else feed,
            input_names=list(feed),
            output_names=list(entry.outputs),
            dynamo=not legacy,
            dynamic_shapes=None if legacy else (dims or None),
            dynamic_axes=dims if legacy else None,
        )
    return path


def _quantized(module: Any, sample: Any, path: Path) -> Path:
    """`path`: the float model's legacy export quantized to int8 by onnxruntime (QDQ, static
    calibration on 8 seeded batches), as users quantize a model for TensorRT."""
    import numpy as np
    import torch
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, quantize_static

    float_path = path.with_name(path.stem + "_float.onnx")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(
            module,
            (sample,),
            str(float_path),
            input_names=["x"],
            output_names=["logits"],
            dynamo=False,
        )
    rng = np.random.default_rng(0)
    batches = iter([{"x": rng.random(tuple(sample.shape), np.float32)} for _ in range(8)])

    class Batches(CalibrationDataReader):  # type: ignore[misc]
        def get_next(self) -> Any:
            return next(batches, None)

    quantize_static(str(float_path), str(path), Batches(), quant_format=QuantFormat.QDQ)
    return path

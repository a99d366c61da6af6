"""The words the engine checks and the command line offers (choices, help text): numpy-free,
so that registering the plugin's options imports no engine (the engine re-exports them)."""

from __future__ import annotations

#: Metric checks: one figure of the whole output against `threshold` (Polygraphy's
#: `--compare l2 cosine_similarity psnr snr`, plus logits KL divergence and top-1 agreement).
METRICS = ("cosine", "l2", "snr", "psnr", "kl", "top1")
#: Checks of the error statistics against atol / rtol (Polygraphy's --check-error-stat).
STAT_CHECKS = ("elemwise", "max", "mean", "median", "quantile")
PRECISIONS = ("fp32", "tf32", "fp16", "bf16", "int8", "fp8")
#: The float64-anchored check (Tolerance(check="fp64"), compare_frameworks only) and the
#: precision of its anchor runs: runners that can run float64 take it; not a test precision.
FP64 = "fp64"
#: "strict": shapes must be equal; "relaxed": shapes equal once their dimensions of size 1
#: are removed compare as the squeezed arrays, with a note (Polygraphy's --no-shape-check).
SHAPE_CHECKS = ("strict", "relaxed")
#: `layers=`: "gate" (every layer decides the verdict) or "report" (only the model outputs do;
#: layers are compared and the first divergence reported).
LAYER_MODES = ("gate", "report")


def parse_precisions(text: str) -> tuple[str, ...]:
    """'fp32,fp16' -> ('fp32', 'fp16'); unknown names raise ValueError listing valid ones.
    Here, numpy-free, because `--trt-precision` is checked while pytest parses its arguments."""
    names = tuple(dict.fromkeys(p.strip().lower() for p in text.split(",") if p.strip()))
    unknown = [p for p in names if p not in PRECISIONS]
    if unknown or not names:
        shown = ", ".join(unknown) if unknown else repr(text)
        raise ValueError(f"unknown precision {shown}; valid precisions: {', '.join(PRECISIONS)}")
    return names

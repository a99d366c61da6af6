"""Every flag of `polygraphy run` (Polygraphy 0.53), once: its `trtcompare run` flag, its
pytest form, or why we leave it out. `trtcompare run` offers the first kind and names the
reason of the last when given (cli/run.py); docs/POLYGRAPHY.md is this table
(tests/test_cli_run.py checks both against `polygraphy run --help`)."""

from __future__ import annotations

from typing import NamedTuple


class Flag(NamedTuple):
    flag: str  # polygraphy run's
    run: str  # trtcompare run's, "" where it has none
    pytest: str  # the marker argument, option, ini key or fixture; "" where none
    why: str = ""  # where `run` is "": why it is left out


_TF = "TensorFlow models are not supported (ONNX, torch, OpenVINO IR, TensorRT engines)"
_TRT_BUILD = "a TensorRT builder setting the trt runner does not offer yet"
_TRT_SHAPES = "the trt runner builds one profile covering every shape set of the test"
_TIMING = 'options={"trt": {"timing_cache": "FILE"}}'
_TIMING_WHY = "the trt runner's timing_cache option, in a test: it loads and saves the file"
_NOT_YET = "not offered yet"
_LOG = "logging is pytest's: -v / -q, --log-cli-level"

FLAGS = (
    Flag("-h", "-h", "pytest --help"),
    Flag("--gen", "", "", "its counterpart here is --gen-test FILE (a pytest test)"),
    Flag("-v", "-v", "-v"),
    Flag("-q", "-q", "-q"),
    Flag("--verbosity", "", "--log-cli-level", _LOG),
    Flag("--silent", "", "-qq", _LOG),
    Flag("--log-format", "", "--log-format", _LOG),
    Flag("--log-file", "", "--log-file", _LOG),
    Flag("--tf", "", "", _TF),
    Flag("--onnxrt", "--onnxrt", 'frameworks=["onnxrt", ...]'),
    Flag("--pluginref", "", "", "Polygraphy's plugin CPU reference; use --onnxref"),
    Flag("--trt", "--trt", 'frameworks=["trt", ...]'),
    Flag("--model-type", "", "", "the model's kind is read from the file (.onnx, .xml)"),
    Flag("--input-shapes", "--input-shapes", "@pytest.mark.shapes, --trt-input-shapes"),
    Flag("--tftrt", "", "", _TF),
    Flag("--minimum-segment-size", "", "", _TF),
    Flag("--dynamic-op", "", "", _TF),
    Flag("--ckpt", "", "", _TF),
    Flag("--tf-outputs", "", "", _TF),
    Flag("--save-pb", "", "", _TF),
    Flag("--save-tensorboard", "", "", _TF),
    Flag("--freeze-graph", "", "", _TF),
    Flag("--gpu-memory-fraction", "", "", _TF),
    Flag("--allow-growth", "", "", _TF),
    Flag("--xla", "", "", _TF),
    Flag("--save-timeline", "", "", _TF),
    Flag("--opset", "", "", _TF),
    Flag("--save-onnx", "", "", "the model is compared as given; save it with onnx.save"),
    Flag("--save-external-data", "", "", "the model is compared as given, not saved"),
    Flag("--external-data-size-threshold", "", "", "the model is compared as given, not saved"),
    Flag("--no-save-all-tensors-to-one-file", "", "", "the model is compared as given"),
    Flag("--shape-inference", "", "", "shape inference runs where a runner needs it"),
    Flag("--no-onnxruntime-shape-inference", "", "", "shape inference runs where needed"),
    Flag("--external-data-dir", "", "", "external data is read from beside the model"),
    Flag("--ignore-external-data", "", "", "the runners need the weights"),
    Flag("--onnx-outputs", "--onnx-outputs", 'outputs="all" or outputs=[...]'),
    Flag("--onnx-exclude-outputs", "", "outputs=[...]", _NOT_YET + ": name the outputs kept"),
    Flag("--onnx-outputs-by-type", "", "layer_dtypes=", _NOT_YET),
    Flag("--fp-to-fp16", "--fp16", 'precisions("fp16") on an onnxrt target'),
    Flag("--providers", "", 'options={"onnxrt": {"providers": [...]}}', _NOT_YET),
    Flag("--graph-optimization-level", "", 'options={"onnxrt": {...}}', _NOT_YET),
    Flag("--trt-min-shapes", "", "@pytest.mark.shapes (a profile of every set)", _TRT_SHAPES),
    Flag("--trt-opt-shapes", "", "@pytest.mark.shapes (a profile of every set)", _TRT_SHAPES),
    Flag("--trt-max-shapes", "", "@pytest.mark.shapes (a profile of every set)", _TRT_SHAPES),
    Flag("--tf32", "--tf32", 'precisions("tf32"), --trt-precision tf32'),
    Flag("--fp16", "--fp16", 'precisions("fp16"), --trt-precision fp16'),
    Flag("--bf16", "--bf16", 'precisions("bf16"), --trt-precision bf16'),
    Flag("--fp8", "", 'precisions("fp8")', "FP8 needs a quantized (QDQ) ONNX model: compare it"),
    Flag(
        "--int8",
        "",
        'precisions("int8")',
        "INT8 needs calibration data, which trtcompare run does not take; compare a quantized "
        "(QDQ) ONNX model instead",
    ),
    Flag("--precision-constraints", "", "", _TRT_BUILD),
    Flag("--sparse-weights", "", "", _TRT_BUILD),
    Flag("--version-compatible", "", "", _TRT_BUILD),
    Flag("--exclude-lean-runtime", "", "", _TRT_BUILD),
    Flag("--calibration-cache", "", "", "INT8 calibration is not supported"),
    Flag("--calib-base-cls", "", "", "INT8 calibration is not supported"),
    Flag("--quantile", "", "", "INT8 calibration is not supported"),
    Flag("--regression-cutoff", "", "", "INT8 calibration is not supported"),
    Flag("--load-timing-cache", "", _TIMING, _TIMING_WHY),
    Flag("--error-on-timing-cache-miss", "", "", _TRT_BUILD),
    Flag("--disable-compilation-cache", "", "", _TRT_BUILD),
    Flag("--save-tactics", "", "", _TRT_BUILD),
    Flag("--load-tactics", "", "", _TRT_BUILD),
    Flag("--tactic-sources", "", "", _TRT_BUILD),
    Flag("--trt-config-script", "", "", _TRT_BUILD),
    Flag("--trt-config-postprocess-script", "", "", _TRT_BUILD),
    Flag("--trt-safety-restricted", "", "", _TRT_BUILD),
    Flag("--refittable", "", "", _TRT_BUILD),
    Flag("--strip-plan", "", "", _TRT_BUILD),
    Flag("--use-dla", "", "", "DLA is not supported"),
    Flag("--allow-gpu-fallback", "", "", "DLA is not supported"),
    Flag(
        "--pool-limit",
        "",
        'options={"trt": {"workspace_bytes": N}}',
        "the workspace pool is the trt runner's workspace_bytes option, in a test",
    ),
    Flag("--preview-features", "", "", _TRT_BUILD),
    Flag("--builder-optimization-level", "", "", _TRT_BUILD),
    Flag("--hardware-compatibility-level", "", "", _TRT_BUILD),
    Flag("--max-aux-streams", "", "", _TRT_BUILD),
    Flag("--quantization-flags", "", "", _TRT_BUILD),
    Flag("--profiling-verbosity", "", "", _TRT_BUILD),
    Flag("--weight-streaming", "", "", _TRT_BUILD),
    Flag("--strongly-typed", "", "", _TRT_BUILD),
    Flag("--runtime-platform", "", "", _TRT_BUILD),
    Flag("--direct-io", "", "", _TRT_BUILD),
    Flag("--tiling-optimization-level", "", "", _TRT_BUILD),
    Flag("--plugins", "", "", _TRT_BUILD),
    Flag("--onnx-flags", "", "", _TRT_BUILD),
    Flag("--plugin-instancenorm", "", "", _TRT_BUILD),
    Flag("--enable-uint8-asymmetric-quantization-dla", "", "", "DLA is not supported"),
    Flag("--trt-outputs", "", "outputs=[...]", "the ONNX names are marked: --onnx-outputs"),
    Flag("--trt-exclude-outputs", "", "", "the ONNX names are marked: --onnx-outputs"),
    Flag("--trt-outputs-by-type", "", "layer_dtypes=", "the ONNX names are marked"),
    Flag("--layer-precisions", "", "find_fp32_nodes", "keep nodes in fp32 in the ONNX model"),
    Flag("--decomposable-attentions", "", "", _TRT_BUILD),
    Flag("--tensor-dtypes", "", "", _TRT_BUILD),
    Flag("--all-tensor-dtypes", "", "", _TRT_BUILD),
    Flag("--tensor-formats", "", "", _TRT_BUILD),
    Flag("--all-tensor-formats", "", "", _TRT_BUILD),
    Flag("--trt-network-postprocess-script", "", "", _TRT_BUILD),
    Flag("--mark-debug", "", 'outputs="all"', "per layer marks the ONNX tensors"),
    Flag("--mark-unfused-tensors-as-debug-tensors", "", 'outputs="all"', "per layer marks"),
    Flag("--save-engine", "", "--trt-engine-cache DIR", "engines are cached by the plugin"),
    Flag("--save-timing-cache", "", _TIMING, _TIMING_WHY),
    Flag("--load-runtime", "", "", _TRT_BUILD),
    Flag("--dla-workspace-allocation-strategy", "", "", "DLA is not supported"),
    Flag("--optimization-profile", "", "", "one profile holds every shape set"),
    Flag("--allocation-strategy", "", "", _TRT_BUILD),
    Flag("--weight-streaming-budget", "", "", _TRT_BUILD),
    Flag("--seed", "--seed", "seed=, --trt-seed"),
    Flag("--val-range", "--val-range", "val_range=, --trt-val-range"),
    Flag("--iterations", "--iterations", "iterations="),
    Flag("--data-loader-backend-module", "", "", "inputs are numpy (torch where it runs)"),
    Flag("--load-inputs", "--load-inputs", 'inputs="inputs.json"'),
    Flag("--data-loader-script", "--data-loader-script", 'inputs="loader.py:load_data"'),
    Flag("--warm-up", "", "", "inference times are medians of the test's runs"),
    Flag("--use-subprocess", "--use-subprocess", "isolate=True, --trt-isolate"),
    Flag("--save-inputs", "--save-inputs", "golden=True stores the inputs"),
    Flag("--save-input-blob", "", "", _NOT_YET + ": --save-inputs writes JSON"),
    Flag("--save-outputs", "--save-outputs", "golden=True, the golden fixture"),
    Flag("--load-outputs", "--load-outputs", 'reference="outputs.json"'),
    Flag("--postprocess", "--postprocess", 'Tolerance(postprocess="top-5")'),
    Flag("--postprocess-func-script", "", "", "post-process in the test, before compare()"),
    Flag("--no-shape-check", "--no-shape-check", 'shape_check="relaxed"'),
    Flag("--validate", "--validate", "validate=True, --trt-validate, ini trtcompare_validate"),
    Flag("--fail-fast", "--fail-fast", "pytest -x"),
    Flag("--check-average", "", "", _NOT_YET + ": each iteration is checked"),
    Flag("--sequential-runners", "", "", "runners run one after the other already"),
    Flag("--compare", "--compare", 'Tolerance(check="indices")'),
    Flag("--compare-func-script", "", "register_statistic", "a statistic of your own"),
    Flag("--save-accuracy-results", "", "--trt-report FILE.json", "the JSON report"),
    Flag("--rtol", "--rtol", "tolerance=, --trt-rtol, ini trtcompare_tolerances"),
    Flag("--atol", "--atol", "tolerance=, --trt-atol, ini trtcompare_tolerances"),
    Flag("--check-error-stat", "--check-error-stat", "Tolerance(check=...)"),
    Flag("--infinities-compare-equal", "--infinities-compare-equal", "inf_equal (default)"),
    Flag("--save-heatmaps", "--save-heatmaps", "--trt-artifacts all --trt-artifacts-dir DIR"),
    Flag("--show-heatmaps", "", "", "pictures are written, not shown"),
    Flag("--save-error-metrics-plot", "", "--trt-artifacts", "failure artifacts hold plots"),
    Flag("--show-error-metrics-plot", "", "", "pictures are written, not shown"),
    Flag("--error-quantile", "--error-quantile", "Tolerance(quantile=...)"),
    Flag("--index-tolerance", "--index-tolerance", "Tolerance(index_tolerance=...)"),
    Flag("--l2-threshold", "--l2-threshold", 'Tolerance(check="l2", threshold=...)'),
    Flag(
        "--cosine-similarity-threshold",
        "--cosine-similarity-threshold",
        'Tolerance(check="cosine", threshold=...)',
    ),
    Flag("--psnr-threshold", "--psnr-threshold", 'Tolerance(check="psnr", threshold=...)'),
    Flag("--snr-threshold", "--snr-threshold", 'Tolerance(check="snr", threshold=...)'),
    Flag("--lpips-threshold", "", "", "LPIPS needs a perceptual network: not offered"),
)


#: The other spellings polygraphy run's --help lists for a flag.
ALIASES = {
    "-q": ("--quiet",),
    "--gen": ("--gen-script",),
    "--input-shapes": ("--inputs",),
    "--tftrt": ("--use-tftrt",),
    "--save-external-data": ("--external-data-path",),
    "--shape-inference": ("--do-shape-inference",),
    "--external-data-dir": ("--load-external-data", "--ext"),
    "--providers": ("--execution-providers",),
    "--calib-base-cls": ("--calibration-base-class",),
    "--save-tactics": ("--save-tactic-replay",),
    "--load-tactics": ("--load-tactic-replay",),
    "--trt-config-postprocess-script": ("--trt-cpps",),
    "--pool-limit": ("--memory-pool-limit",),
    "--tensor-dtypes": ("--tensor-datatypes",),
    "--all-tensor-dtypes": ("--all-tensor-datatypes",),
    "--trt-network-postprocess-script": ("--trt-npps",),
    "--iterations": ("--iters",),
    "--load-inputs": ("--load-input-data",),
    "--save-inputs": ("--save-input-data",),
    "--save-outputs": ("--save-results",),
    "--postprocess": ("--postprocess-func",),
    "--compare": ("--compare-func",),
    "--load-outputs": ("--load-results",),
    "--rtol": ("--rel-tol",),
    "--atol": ("--abs-tol",),
    "--l2-threshold": ("--l2-tolerance",),
    "--psnr-threshold": ("--psnr-tolerance",),
    "--snr-threshold": ("--snr-tolerance",),
    "--lpips-threshold": ("--lpips-tolerance",),
}


def not_offered() -> dict[tuple[str, ...], str]:
    """polygraphy run's flags `trtcompare run` leaves out (with their other spellings), and
    why."""
    return {(row.flag, *ALIASES.get(row.flag, ())): row.why for row in FLAGS if not row.run}


def spellings(flag: str) -> list[str]:
    """`trtcompare run`'s `flag` and the polygraphy run spellings it takes too: the flag's
    aliases, and a flag of another name that it stands for (--fp-to-fp16 for --fp16)."""
    names = [flag]
    for row in FLAGS:
        if row.run and row.run.split()[0] == flag:
            names += [n for n in (row.flag, *ALIASES.get(row.flag, ())) if n not in names]
    return names


def markdown() -> str:
    """The migration table of docs/POLYGRAPHY.md."""
    lines = [
        "| polygraphy run | trtcompare run | pytest | note |",
        "|---|---|---|---|",
    ]
    for row in FLAGS:
        code = [f"`{cell}`" if cell else "" for cell in (row.flag, row.run, row.pytest)]
        lines.append(f"| {' | '.join(code)} | {row.why} |")
    return "\n".join(lines) + "\n"

"""Every ONNX backend node test that onnxruntime can run, through our onnxrt runner and
compare_outputs(rule="allclose"), gets the verdict of onnx's own test runner
(`onnx.backend.test.runner.Runner.assert_similar_outputs`: shape, dtype, assert_allclose).
"""

from __future__ import annotations

import warnings
from collections import Counter

import numpy as np
import onnx
import pytest

from pytest_trtcompare import compare_outputs, runners
from pytest_trtcompare.errors import ModelLoadError

loader = pytest.importorskip("onnx.backend.test.loader")
onnx_runner = pytest.importorskip("onnx.backend.test.runner")


def _onnx_verdict(reference, outputs, case) -> bool:
    try:
        onnx_runner.Runner.assert_similar_outputs(reference, outputs, case.rtol, case.atol)
    except AssertionError:
        return False
    return True


def _runnable(case):
    """(runner, feeds with expected outputs) when onnxruntime runs the case on tensors."""
    try:
        runner = runners.create("onnxrt", case.model)
    except Exception:  # onnxruntime lacks the op, the IR version, a locale ...
        return None
    sets = [
        (inputs, expected)
        for inputs, expected in case.data_sets
        if all(isinstance(x, np.ndarray) and x.dtype != object for x in [*inputs, *expected])
    ]
    return (runner, sets) if sets else None


@pytest.mark.slow  # every node case of the ONNX backend suite, through two runtimes
def test_backend_node_cases_get_onnx_verdicts():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the case generators overflow casts on purpose
        cases = loader.load_model_tests(kind="node")
    tally: Counter[str] = Counter()
    disagreements = []
    for case in cases:
        runnable = _runnable(case)
        if runnable is None:
            tally["not runnable by onnxruntime"] += 1
            continue
        runner, sets = runnable
        names = [spec.name for spec in runner.input_specs()]
        for inputs, expected in sets:
            try:
                actual = runner.infer(dict(zip(names, inputs, strict=True)))
            except Exception:
                tally["onnxruntime fails at run time"] += 1
                continue
            outputs = [actual[name] for name in runner.output_names()]
            theirs = _onnx_verdict(expected, outputs, case)
            ours = compare_outputs(
                dict(zip(runner.output_names(), outputs, strict=True)),
                dict(zip(runner.output_names(), expected, strict=True)),
                rule="allclose",
                atol=case.atol,
                rtol=case.rtol,
                nan_equal=True,  # np.testing.assert_allclose's default, which onnx uses
            ).passed
            dtypes_equal = all(a.dtype == e.dtype for a, e in zip(outputs, expected, strict=True))
            # onnx also fails a dtype change; we compare values across dtypes by design
            ours = ours and dtypes_equal
            tally["passed" if theirs else "failed"] += 1
            if ours != theirs:
                disagreements.append(case.name)
    assert disagreements == []
    assert tally["passed"] > 1000 and tally["failed"] > 0, tally


def _is_structured(case) -> bool:
    model = case.model if isinstance(case.model, onnx.ModelProto) else onnx.load(case.model)
    values = [*model.graph.input, *model.graph.output]
    return any(vi.type.WhichOneof("value") != "tensor_type" for vi in values)


def _onnxruntime_refusal(model) -> str | None:
    """onnxruntime's own message when it cannot load `model`, None when it can."""
    import onnxruntime as ort

    try:
        ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    except Exception as exc:  # onnxruntime raises its own pybind exception types
        return str(exc)
    return None


def _ort_version() -> str:
    import onnxruntime

    return str(onnxruntime.__version__)


@pytest.mark.parametrize("framework", ["onnxrt", "onnxref"])
def test_sequence_and_optional_cases_run_and_get_onnx_verdicts(framework):
    """Issue 14 item 4: sequences (lists of arrays) and optionals (None when empty) are fed,
    returned and compared element by element; no runner error where onnx's runner passes."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cases = [c for c in loader.load_model_tests(kind="node") if _is_structured(c)]
    assert len(cases) >= 29
    tally: Counter[str] = Counter()
    problems: list[str] = []
    for case in cases:
        try:
            runner = runners.create(framework, case.model)
        except ModelLoadError as exc:
            # onnxruntime itself refuses the model (an opset newer than it, or an op of that
            # opset it has no kernel for yet): ours is its refusal, whatever its wording
            refusal = _onnxruntime_refusal(case.model)
            assert framework == "onnxrt" and refusal is not None, (case.name, str(exc))
            # its last words, or ours where we read the model's versions before it does
            # (an IR version newer than that onnxruntime reads: onnxruntime 1.23 on Python 3.10)
            ours = f"onnxruntime {_ort_version()} reads IR version <="
            words = refusal.strip().splitlines()[0][-60:]
            assert words in str(exc) or ours in str(exc), case.name
            tally["refused by onnxruntime itself"] += 1
            continue
        names = [spec.name for spec in runner.input_specs()]
        for inputs, expected in case.data_sets:
            actual = runner.infer(dict(zip(names, inputs, strict=True)))
            outputs = [actual[name] for name in runner.output_names()]
            try:
                if not _onnx_verdict(expected, outputs, case):
                    problems.append(f"{case.name}: onnx's verdict fails")
            except TypeError:  # onnx's comparison recurses into a 0-d array of a sequence
                tally["onnx's comparison cannot read it"] += 1
            result = compare_outputs(
                actual,
                dict(zip(runner.output_names(), expected, strict=True)),
                rule="allclose",
                atol=case.atol,
                rtol=case.rtol,
                nan_equal=True,
            )
            if not result.passed:
                problems.append(f"{case.name}: {result.report().splitlines()[0]}")
            tally["passed"] += 1
    assert problems == [], tally
    # onnxruntime 1.32 runs 20 (it refuses the opsets newer than it); 1.23, the last on
    # Python 3.10, reads IR version 11 at most and runs 19
    assert tally["passed"] >= (19 if framework == "onnxrt" else 29), tally

"""`trtcompare run`: polygraphy run's comparison from the shell, and the test --gen-test writes
(issue 47). Exit 0 agree, 1 disagree, 2 a usage or model error."""

from __future__ import annotations

import contextlib
import functools
import io
import json
import re
import shlex
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from pytest_trtcompare.cli import main, polygraphy_flags
from pytest_trtcompare.goldens import write_polygraphy_inputs, write_polygraphy_outputs

TWIN = """
import torch


class Twin(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.full((4, 4), 0.5))

    def forward(self, x):
        return {"y": torch.tanh(x @ self.w)}


def make():
    return Twin().eval()
"""


def _model(scale: float) -> onnx.ModelProto:
    weight = numpy_helper.from_array(np.full((4, 4), scale, np.float32), "w")
    nodes = [helper.make_node("MatMul", ["x", "w"], ["h"]), helper.make_node("Tanh", ["h"], ["y"])]
    graph = helper.make_graph(
        nodes,
        "m",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", 4])],
        [weight],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


@pytest.fixture
def models(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    onnx.save(_model(0.5), "m.onnx")
    onnx.save(_model(0.6), "changed.onnx")  # a planted change
    (tmp_path / "twin.py").write_text(TWIN)
    return tmp_path


def run(capsys, *argv: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(["run", *argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_agreeing_frameworks_exit_0_with_each_case_and_the_accuracy_summary(models, capsys):
    code, out, _ = run(capsys, "m.onnx", "--onnxrt", "--onnxref", "--input-shapes", "x:[2,4]")
    assert code == 0
    assert out.startswith(
        "PASSED onnxref-fp32-bs2: 1 output within tolerance\n\naccuracy summary\n"
    )
    assert "onnxref-fp32-bs2 :: y" in out


def test_precision_flags_run_every_target_at_each(models, capsys):
    argv = ["m.onnx", "--onnxrt", "--onnxref", "--fp16", "--bf16", "--inputs", "x:[2,4]"]
    code, out, _ = run(capsys, *argv, "--atol", "1e-2", "--rtol", "1e-2")
    assert code == 0
    assert "PASSED onnxref-fp16-bs2" in out and "PASSED onnxref-bf16-bs2" in out


def test_a_disagreement_exits_1_with_pytests_report(models, capsys):
    argv = ["m.onnx", "--onnxrt", "--onnxref", "--fp16", "--input-shapes", "x:[2,4]"]
    code, out, _ = run(capsys, *argv, "--atol", "0", "--rtol", "0")
    assert code == 1
    assert out.startswith("FAILED onnxref-fp16-bs2: onnxref-fp16 vs onnxrt-fp32: 1 of 1 outputs")
    assert "elemwise tolerance atol=0 (option) rtol=0 (option)" in out  # the flags
    assert "worst elements:" in out


def test_per_output_tolerances_as_polygraphy_writes_them(models, capsys):
    argv = ["m.onnx", "--onnxrt", "--onnxref", "--fp16", "--input-shapes", "x:[2,4]"]
    assert run(capsys, *argv, "--atol", "0", "y:0.1", "--rtol", "0")[0] == 0
    assert run(capsys, *argv, "--atol", "0.1", "y:0", "--rtol", "0")[0] == 1


def test_saved_outputs_are_the_reference(models, capsys):
    """polygraphy run --save-inputs/--save-outputs files, then --load-outputs: a model
    changed since fails, the same model passes."""
    x = np.random.default_rng(0).standard_normal((2, 4)).astype(np.float32)
    write_polygraphy_inputs(models / "inputs.json", [{"x": x}])
    write_polygraphy_outputs(models / "outputs.json", [{"y": np.tanh(x @ np.full((4, 4), 0.5))}])
    saved = ["--onnxrt", "--load-outputs", "outputs.json", "--load-inputs", "inputs.json"]
    assert run(capsys, "m.onnx", *saved, "--atol", "1e-5")[0] == 0
    code, out, _ = run(capsys, "changed.onnx", *saved, "--atol", "1e-5")
    assert code == 1 and "vs saved outputs.json" in out


@pytest.mark.parametrize(
    ("flag", "message"),
    [
        ("--iterations", "argument --iterations/--iters: takes an int >= 1, got 0"),
        ("--seed", "argument --seed: takes an int >= 0, got -1"),
    ],
)
def test_counts_out_of_range_are_named_by_their_flag(models, capsys, flag, message):
    with pytest.raises(SystemExit) as info:
        main(["run", "m.onnx", "--onnxrt", flag, "0" if "iter" in flag else "-1"])
    assert info.value.code == 2 and message in capsys.readouterr().err


def test_a_torchscript_or_torch_export_file(models, capsys, monkeypatch):
    torch = pytest.importorskip("torch")
    monkeypatch.syspath_prepend(str(models))
    import twin

    example = torch.zeros(2, 4)
    torch.jit.trace(twin.make(), example, strict=False).save("twin.pt")
    torch.export.save(torch.export.export(twin.make(), (example,)), "twin.pt2")
    for path in ("twin.pt", "twin.pt2"):
        code, out, _ = run(capsys, "m.onnx", "--onnxrt", "--torch", path, "--inputs", "x:[2,4]")
        assert code == 0 and "PASSED torch-fp32-bs2" in out, out
        code, out, _ = run(
            capsys, "m.onnx", "--onnxrt", "--torch", path, "--inputs", "x:[2,4]", "--fp16"
        )
        assert code == 0 and "PASSED torch-fp16-bs2" in out, out  # its weights cast too
    code, out, _ = run(capsys, "m.onnx", "--onnxrt", "--torch", "gone.pt", "--inputs", "x:[2,4]")
    assert code == 2 and "torch runner: " in out and "gone.pt does not exist" in out
    argv = ["m.onnx", "--onnxrt", "--torch", "twin.pt2", "--inputs", "x:[2,4]"]
    assert run(capsys, *argv, "--gen-test", "tests/test_twin.py")[0] == 0
    written = (models / "tests" / "test_twin.py").read_text()
    assert 'models={"torch": "../twin.pt2"},' in written
    written_run = subprocess.run(
        [sys.executable, "-m", "pytest", "tests/test_twin.py", "-p", "no:cacheprovider", "-q"],
        capture_output=True,
        text=True,
    )
    assert written_run.returncode == 0, written_run.stdout
    assert "1 passed" in written_run.stdout


def test_a_torch_module_by_its_factory(models, capsys):
    code, out, _ = run(capsys, "m.onnx", "--onnxrt", "--torch", "twin:make", "--inputs", "x:[2,4]")
    assert code == 0, out
    assert "PASSED torch-fp32-bs2" in out


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ["m.onnx"],
            "trtcompare: no framework to run: give one or more of --onnxrt, --onnxref, --torch",
        ),
        (["m.onnx", "--onnxrt", "oops"], "trtcompare: --onnxrt takes no value (got 'oops')"),
        (["m.onnx", "--torch", "twin:nope", "--onnxrt"], "trtcompare: --torch twin:nope: "),
        (
            ["m.onnx", "--onnxrt", "--atol", "big"],
            "trtcompare: --atol big: 'big' is not a number; give VALUE, or NAME:VALUE",
        ),
        (
            ["m.onnx", "--onnxrt", "--atol", "-1"],
            "trtcompare: --atol -1: atol must be finite and >= 0",
        ),
        (
            ["m.onnx", "--onnxrt", "--check-error-stat", "bogus"],
            "trtcompare: --check-error-stat bogus: 'bogus' is not one of elemwise, max, mean,",
        ),
        (
            ["m.onnx", "--onnxrt", "--error-quantile", "y:2"],
            "trtcompare: --error-quantile y:2: quantile must be in [0, 1], got 2.0",
        ),
        (
            ["m.onnx", "--onnxrt", "--cosine-similarity-threshold", "2"],
            "trtcompare: --cosine-similarity-threshold 2: threshold of check='cosine' must be",
        ),
        (
            ["m.onnx", "--onnxrt", "--torch"],
            "trtcompare: --torch needs the module to run beside m.onnx: --torch MODULE:FACTORY",
        ),
        (
            ["m.onnx", "--onnxrt", "--input-shapes", "x=[1,4]"],
            "trtcompare: --input-shapes x=[1,4]: cannot read 'x=[1,4]': give NAME:1x3x224x224",
        ),
        (
            ["m.onnx", "--onnxrt", "--inputs", "x:[1,4]", "--val-range", "x:[5,0]"],
            "trtcompare: --val-range x:[5,0]: '[5,0]': LOW must not exceed HIGH",
        ),
    ],
)
def test_mistakes_exit_2_with_one_message(models, capsys, argv, message):
    code, out, err = run(capsys, *argv)
    assert code == 2
    assert err.startswith(message) and "Traceback" not in err + out


def test_a_model_error_exits_2_naming_the_flag_to_give(models, capsys):
    code, out, _ = run(capsys, "m.onnx", "--onnxrt", "--onnxref")
    assert code == 2
    assert (
        "input x: float32[n, 4] has dynamic dimensions: give its shape with --input-shapes x:[1,4]"
        in out
    )
    code, out, _ = run(capsys, "nope.onnx", "--onnxrt", "--onnxref", "--inputs", "x:[1,4]")
    assert code == 2 and "nope.onnx' does not exist" in out


@pytest.mark.parametrize(
    ("flag", "why"),
    [
        ("--int8", "INT8 needs calibration data"),
        ("--tf", "TensorFlow models are not supported"),
        ("--gen", "its counterpart here is --gen-test FILE"),
        ("--gen-script", "its counterpart here is --gen-test FILE"),  # Polygraphy's alias
        ("--silent", "logging is pytest's"),
    ],
)
def test_polygraphy_flags_not_offered_are_named_with_the_reason(models, capsys, flag, why):
    with pytest.raises(SystemExit) as info:
        main(["run", "m.onnx", "--onnxrt", flag])
    assert info.value.code == 2
    assert f"{flag} (polygraphy run) is not offered: {why}" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("extra", "outcome"),
    [
        (["--fp16", "--atol", "1e-2", "--rtol", "1e-2"], {"passed": 1}),
        (["--fp16", "--atol", "0", "--rtol", "0"], {"failed": 1}),
        (["--torch", "twin:make"], {"passed": 2}),
        (
            [
                "--atol",
                "1e-3",
                "y:1e-2",
                "--cosine-similarity-threshold",
                "0.99",
                "--val-range",
                "x:[0,1]",
                "--seed",
                "3",
                "--iterations",
                "2",
            ],
            {"passed": 1},
        ),
    ],
)
def test_gen_test_writes_the_test_that_decides_as_the_command(pytester, capsys, extra, outcome):
    if "--torch" in extra:
        pytest.importorskip("torch")  # the supported-version ends test without it
    onnx.save(_model(0.5), pytester.path / "m.onnx")
    (pytester.path / "twin.py").write_text(TWIN)
    pytester.chdir()
    argv = ["m.onnx", "--onnxrt", "--onnxref", "--input-shapes", "x:[2,4]", *extra]
    command = run(capsys, *argv)[0]
    assert command == (0 if "passed" in outcome else 1)
    code, out, _ = run(capsys, *argv, "--gen-test", "test_generated.py")
    selected = ["--trt-precision", "fp16"] if "--fp16" in extra else []
    command = " ".join(["pytest", *selected, "test_generated.py"])
    assert code == 0 and out == f"wrote test_generated.py (run it: {command})\n"
    pytester.syspathinsert()
    result = pytester.runpytest(*selected, "test_generated.py")
    result.assert_outcomes(**outcome)


def test_polygraphys_other_comparison_flags_reach_the_tolerance(models, capsys):
    argv = ["m.onnx", "--onnxrt", "--onnxref", "--fp16", "--inputs", "x:[2,4]"]
    code, out, _ = run(capsys, *argv, "--compare", "indices", "--index-tolerance", "0")
    assert code == 1 and "2 / 2 rows have indices out of place" in out  # fp16 breaks the ties
    assert run(capsys, *argv, "--compare", "indices", "--index-tolerance", "4")[0] == 0
    assert run(capsys, *argv, "--postprocess", "top-2", "--atol", "0", "--rtol", "0")[0] == 0
    stat = ["--check-error-stat", "quantile", "--error-quantile", "0.5", "--atol", "1e-3"]
    assert run(capsys, *argv, *stat)[0] == 0
    code, _, err = run(capsys, *argv, "--error-quantile", "2")
    assert code == 2 and "quantile must be in [0, 1], got 2.0" in err
    assert run(capsys, *argv, "--infinities-compare-equal")[0] == 0


def test_fail_fast_stops_at_the_first_disagreement(models, capsys):
    argv = ["m.onnx", "--onnxrt", "--onnxref", "--fp16", "--bf16", "--inputs", "x:[2,4]"]
    code, out, _ = run(capsys, *argv, "--atol", "0", "--rtol", "0", "--fail-fast")
    assert code == 1 and out.count("FAILED ") == 1 and "bf16" not in out.split("accuracy")[0]


def test_saved_inputs_and_outputs_round_trip_and_polygraphy_reads_them(models, capsys):
    """--save-inputs/--save-outputs, then --load-*: the same model passes, a changed one
    fails; polygraphy run judges the changed model against the same files alike."""
    first = ["--onnxrt", "--inputs", "x:[2,4]", "--save-inputs", "in.json"]
    code, out, _ = run(capsys, "m.onnx", *first, "--save-outputs", "out.json")
    assert code == 0
    assert out.startswith(
        "wrote in.json (--load-inputs in.json)\n"
        "wrote out.json (onnxrt-fp32; --load-outputs out.json)\nPASSED onnxrt-fp32-bs2"
    )
    loaded = ["--onnxrt", "--load-inputs", "in.json", "--load-outputs", "out.json"]
    assert run(capsys, "m.onnx", *loaded)[0] == 0
    assert run(capsys, "changed.onnx", *loaded)[0] == 1
    for model, code in (("m.onnx", 0), ("changed.onnx", 1)):  # polygraphy run alike
        polygraphy = subprocess.run(
            [str(Path(sys.executable).parent / "polygraphy"), "run", model, *loaded],
            capture_output=True,
            text=True,
        )
        said = polygraphy.stdout + polygraphy.stderr
        assert polygraphy.returncode == code, said
        assert ("PASSED" if code == 0 else "FAILED") in said
    code, _, err = run(capsys, "m.onnx", *loaded, "--save-outputs", "again.json")
    assert code == 2 and "--save-outputs with --load-outputs" in err


def test_a_data_loader_script_feeds_the_runs(models, capsys):
    (models / "loader.py").write_text(
        "import numpy as np\n\n\ndef load_data():\n"
        "    for seed in (0, 1):\n"
        "        yield {'x': np.random.default_rng(seed).random((3, 4), dtype=np.float32)}\n"
    )
    argv = ["m.onnx", "--onnxrt", "--onnxref", "--data-loader-script", "loader.py"]
    code, out, _ = run(capsys, *argv, "--save-inputs", "fed.json")
    assert code == 0 and "PASSED onnxref-fp32" in out
    fed = json.loads((models / "fed.json").read_text())
    assert len(fed) == 2  # an iteration per feed the loader yields
    with pytest.raises(SystemExit):  # one source of inputs
        main(["run", *argv, "--load-inputs", "fed.json"])


def test_metric_thresholds_add_metric_checks_per_output_as_polygraphy(models, capsys):
    argv = ["m.onnx", "--onnxrt", "--onnxref", "--fp16", "--inputs", "x:[2,4]"]
    code, out, _ = run(capsys, *argv, "--snr-threshold", "200")
    assert code == 1 and "FAILED snr 81.7" in out and "< 200 dB" in out
    # a per-output value replaces the default for that output, as Polygraphy's does
    assert run(capsys, *argv, "--snr-threshold", "200", "y:30")[0] == 0
    both = ["--cosine-similarity-threshold", "0.99", "--psnr-threshold", "40"]
    code, out, _ = run(capsys, *argv, *both, "--l2-threshold", "1e-3")
    assert code == 0 and "cosine >= 0.99 (option); l2 <= 0.001 (option); psnr >= 40 dB" in " ".join(
        out.split()
    )


@functools.cache
def _polygraphy_run_flags() -> dict[str, tuple[str, ...]]:
    """Each option `polygraphy run --help` lists: its first flag -> its other spellings."""
    help_text = subprocess.run(
        [str(Path(sys.executable).parent / "polygraphy"), "run", "--help"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    found: dict[str, tuple[str, ...]] = {}
    for flag, rest in re.findall(r"^ {2}(-{1,2}[a-z][\w-]*)(.*)", help_text, flags=re.M):
        found.setdefault(flag, tuple(re.findall(r", (-{1,2}[a-z][\w-]*)", rest)))
    return found


def test_the_migration_table_has_every_flag_of_polygraphy_run_once():
    listed = [row.flag for row in polygraphy_flags.FLAGS]
    assert len(listed) == len(set(listed))
    assert set(listed) == set(_polygraphy_run_flags())
    spelled = {flag: names for flag, names in _polygraphy_run_flags().items() if names}
    assert spelled == {"-h": ("--help",), "-v": ("--verbose",), **polygraphy_flags.ALIASES}


def test_the_migration_page_is_the_table_and_its_example_is_what_gen_test_writes(
    tmp_path, monkeypatch, capsys
):
    page = (Path(__file__).parent.parent / "docs" / "POLYGRAPHY.md").read_text()
    assert page.endswith(polygraphy_flags.markdown())
    command = next(line for line in page.splitlines() if "--gen-test test_model.py" in line)
    monkeypatch.chdir(tmp_path)
    onnx.save(_model(0.5), "model.onnx")
    assert main(shlex.split(command)[1:]) == 0
    written = (tmp_path / "test_model.py").read_text()
    assert f"```python\n{written}```\n" in page


@pytest.mark.parametrize("row", polygraphy_flags.FLAGS, ids=lambda row: row.flag)
def test_each_flag_is_taken_or_refused_with_its_reason(models, capsys, row):
    if row.run:  # trtcompare run takes it: its --help lists it
        assert row.run.split()[0] in _run_help()
        return
    for flag in (row.flag, *polygraphy_flags.ALIASES.get(row.flag, ())):
        with pytest.raises(SystemExit) as info:
            main(["run", "m.onnx", "--onnxrt", flag])
        assert info.value.code == 2
        assert f"{flag} (polygraphy run) is not offered: {row.why}" in capsys.readouterr().err


@functools.cache
def _run_help() -> str:
    with pytest.raises(SystemExit), contextlib.redirect_stdout(io.StringIO()) as out:
        main(["run", "--help"])
    return out.getvalue()


def test_polygraphys_other_spellings_are_taken(models, capsys):
    argv = ["m.onnx", "--onnxrt", "--onnxref", "--fp-to-fp16", "--inputs", "x:[2,4]"]
    code, out, _ = run(capsys, *argv, "--abs-tol", "0", "--rel-tol", "0", "--iters", "2")
    assert code == 1 and "FAILED onnxref-fp16-bs2" in out and "(2 of 2 fail)" in out
    code, out, _ = run(
        capsys, "m.onnx", "--onnxrt", "--onnxref", "--inputs", "x:[2,4]", *("--onnx-outputs", "*")
    )
    assert code == 0 and "all 2 outputs within tolerance" in out  # '*' marks every tensor


def test_gen_test_elsewhere_imports_the_factory_from_where_the_command_ran(models, capsys):
    (models / "sub").mkdir()
    argv = ["m.onnx", "--onnxrt", "--torch", "twin:make", "--inputs", "x:[2,4]"]
    code, out, _ = run(
        capsys, *argv, "--save-inputs", "a.json", "--fail-fast", *("--gen-test", "sub/test_t.py")
    )
    assert code == 0
    assert out == (
        "wrote sub/test_t.py (run it: pytest -x sub/test_t.py)\n"
        "not in the test: --save-inputs (a test stores its outputs and inputs as a golden: "
        "golden=True)\n"
    )
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_t.py"],
        cwd=models / "sub",
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stdout


def test_gen_test_writes_what_ruff_format_writes(models, capsys):
    """The dev tools' formatter leaves a written test as it is (double quotes, one tolerance
    entry a line where it is long, the factory's import)."""
    argv = ["m.onnx", "--onnxrt", "--onnxref", "--torch", "twin:make", "--inputs", "x:[2,4]"]
    long = ["--atol", "1e-3", "y:1e-2", "--cosine-similarity-threshold", "0.99"]
    (models / "sub").mkdir()
    for path in ("test_a.py", "sub/test_b.py"):
        assert run(capsys, *argv, *long, "--val-range", "x:[0,1]", "--gen-test", path)[0] == 0
    ruff = subprocess.run(
        [str(Path(sys.executable).parent / "ruff"), "format", "--check", "test_a.py", "sub"],
        capture_output=True,
        text=True,
    )
    assert ruff.returncode == 0, ruff.stdout


def test_verbose_prints_the_report_of_a_passing_case_too(models, capsys):
    argv = ["m.onnx", "--onnxrt", "--onnxref", "--fp16", "--inputs", "x:[2,4]"]
    code, out, _ = run(capsys, *argv, "-v")
    assert code == 0
    assert out.startswith(
        "PASSED onnxref-fp16-bs2: onnxref-fp16 vs onnxrt-fp32: 1 output within tolerance\n\n"
        "passed: y (float32 vs float32, shape (2, 4)): max abs "
    )


def test_gen_test_elsewhere_names_a_saved_folder_from_the_test(models, capsys):
    """An ONNX test-data folder (no suffix) as --load-outputs: the written test in another
    folder finds it, as it finds the model."""
    x = np.random.default_rng(0).standard_normal((2, 4)).astype(np.float32)
    data = models / "data" / "test_data_set_0"
    data.mkdir(parents=True)
    (data / "input_0.pb").write_bytes(numpy_helper.from_array(x, "x").SerializeToString())
    y = np.tanh(x @ np.full((4, 4), 0.5, np.float32))
    (data / "output_0.pb").write_bytes(numpy_helper.from_array(y, "y").SerializeToString())
    (models / "sub").mkdir()
    argv = ["m.onnx", "--onnxrt", "--load-outputs", "data", "--atol", "1e-5"]
    assert run(capsys, *argv)[0] == 0
    assert run(capsys, *argv, "--gen-test", "sub/test_saved.py")[0] == 0
    assert 'reference="../data"' in (models / "sub" / "test_saved.py").read_text()
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_saved.py"],
        cwd=models / "sub",
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stdout


def test_a_runner_alone_is_told_what_its_pass_means(models, capsys):
    code, out, _ = run(capsys, "m.onnx", "--onnxrt", "--inputs", "x:[2,4]")
    assert code == 0
    assert out.endswith(
        "\nnote: onnxrt ran alone, so its outputs were compared with a second run of itself; "
        "give a second runner, --fp16/--bf16, --load-outputs or --validate\n"
    )
    for quiet in (["--validate"], ["-q"], ["--fp16"]):
        assert "note: " not in run(capsys, "m.onnx", "--onnxrt", "--inputs", "x:[2,4]", *quiet)[1]


def test_onnx_outputs_names_inner_tensors_as_polygraphy_marks_them(models, capsys):
    argv = ["m.onnx", "--onnxrt", "--onnxref", "--inputs", "x:[2,4]", "--onnx-outputs", "h", "y"]
    code, out, _ = run(capsys, *argv, "-v")
    assert code == 0
    assert "passed: h (float32 vs float32, shape (2, 4))" in out
    assert "passed: y (float32 vs float32, shape (2, 4))" in out
    assert run(capsys, *argv, "--gen-test", "test_inner.py")[0] == 0
    assert 'outputs=["h", "y"],' in (models / "test_inner.py").read_text()
    code, out, _ = run(capsys, *argv[:-2], "hh")
    assert code == 2 and "has no output(s) ['hh']" in out


def test_save_outputs_writes_a_golden_or_npz_by_its_suffix(models, capsys):
    argv = ["m.onnx", "--onnxrt", "--inputs", "x:[2,4]", "--validate"]
    assert run(capsys, *argv, "--iterations", "2", "--save-outputs", "ref.safetensors")[0] == 0
    saves = ["--save-outputs", "ref.npz", "--save-inputs", "in.json"]
    assert run(capsys, *argv, *saves)[0] == 0
    for saved in (["ref.safetensors"], ["ref.npz", "--load-inputs", "in.json"]):
        code, out, _ = run(capsys, "changed.onnx", *argv[1:], "--load-outputs", *saved)
        assert code == 1 and f"vs saved {saved[0]}" in out, out
        assert run(capsys, "m.onnx", *argv[1:], "--load-outputs", *saved)[0] == 0
    capsys.readouterr()
    assert main(["show", "ref.safetensors"]) == 0  # a golden of 2 iterations with its inputs
    shown = capsys.readouterr().out
    assert "iteration 1" in shown and "x" in shown
    code, _, err = run(capsys, *argv, "--iterations", "2", "--save-outputs", "two.npz")
    assert code == 2
    assert "--save-outputs two.npz: an .npz holds one iteration, this run made 2" in err
    assert not (models / "two.npz").exists()


def test_a_warning_is_one_line_of_the_command(models, capsys):
    code, _, err = run(
        capsys, "m.onnx", "--onnxrt", "--onnxref", "--inputs", "x:[2,4]", "--atol", "yy:1"
    )
    assert code == 0
    assert err == (
        "trtcompare: warning: tolerance given for output(s) ['yy'] that the comparison does "
        "not have; did you mean 'y'? (1 output)\n"
    )


def test_saved_outputs_without_inputs_are_named_by_the_flags(models, capsys):
    argv = ["m.onnx", "--onnxrt", "--inputs", "x:[2,4]"]
    assert run(capsys, *argv, "--save-outputs", "out.json")[0] == 0
    code, out, _ = run(capsys, *argv, "--load-outputs", "out.json")
    assert code == 2
    assert (
        "InputDataError: --load-outputs out.json holds no inputs: give the inputs its outputs "
        "were made from, e.g. --load-inputs inputs.json (polygraphy run --save-inputs)"
    ) in out
    code, out, _ = run(capsys, *argv, "--load-outputs", "gone.json")
    assert code == 2 and "InputDataError: --load-outputs gone.json: " in out


def test_no_ran_alone_note_when_nothing_ran(tmp_path, capsys):
    """A missing model is an error (exit 2), with no note of what a run compared."""
    assert main(["run", str(tmp_path / "nope.onnx"), "--onnxref"]) == 2
    out = capsys.readouterr().out
    assert "ran alone" not in out

"""What the engine accepts and refuses, with the one-line message a user gets (issue 10, 7)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from pytest_trtcompare import Tolerance, compare_outputs
from pytest_trtcompare.errors import InvalidOutputError, ToleranceError

torch = pytest.importorskip("torch")

ONES = np.ones(3, np.float32)


def test_keys_that_collide_after_str_are_refused():
    with pytest.raises(
        InvalidOutputError, match=r"actual has two outputs named '1': keys 1 and '1'"
    ):
        compare_outputs({1: ONES, "1": ONES}, {"1": ONES})


def test_a_single_name_is_one_name_not_its_characters():
    result = compare_outputs({"logits": ONES, "b": ONES}, {"logits": ONES}, names="logits")
    assert result.passed and list(result.outputs) == ["logits"]
    assert result.restricted_to == ("logits",)


def _torch_cases() -> list[tuple[object, str]]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # quantized and complex32 creation warn as deprecated
        quantized = torch.quantize_per_tensor(torch.ones(3), 0.1, 0, torch.quint8)
        complex32 = torch.ones(3, dtype=torch.complex32)
    return [
        (torch.ones(3, device="meta"), "is a torch tensor on the meta device: it has no values"),
        (quantized, r"is a quantized torch tensor \(quint8\): pass tensor.dequantize\(\)"),
        (complex32, r"is a complex tensor \(complex32\); only bool, integer and float"),
        (torch.ones(3, dtype=torch.complex64), r"is a complex tensor \(complex64\)"),
    ]


@pytest.mark.parametrize(("tensor", "message"), _torch_cases())
def test_torch_tensors_without_comparable_values_are_refused_by_name(tensor, message):
    with pytest.raises(InvalidOutputError, match=rf"output 'y' \(actual\) {message}"):
        compare_outputs({"y": tensor}, {"y": ONES})


def test_sparse_torch_tensors_compare_as_the_values_they_stand_for():
    dense = torch.tensor([[0.0, 1.5], [2.0, 0.0]])
    for sparse in (dense.to_sparse(), dense.to_sparse_csr()):
        assert compare_outputs({"y": sparse}, {"y": dense.numpy()}).passed
    drifted = torch.tensor([[0.0, 1.5], [2.5, 0.0]]).to_sparse()
    assert not compare_outputs({"y": drifted}, {"y": dense.numpy()}).passed


def test_bfloat16_torch_tensors_keep_their_values_and_dtype_name():
    tensor = torch.tensor([1.0, 1.0078125, -3.5e38], dtype=torch.bfloat16)
    result = compare_outputs({"y": tensor}, {"y": tensor.float().numpy()}, atol=0, rtol=0)
    assert result.passed and result.outputs["y"].actual_dtype == "bfloat16"


@pytest.mark.skipif(np.finfo(np.longdouble).max <= np.finfo(np.float64).max, reason="no x87")
def test_long_double_beyond_float64_is_refused_not_passed_as_inf():
    big = np.array([1.0, np.longdouble("1e4000")])
    with pytest.raises(InvalidOutputError, match=r"beyond float64's range, e\.g\. .* at \(1,\)"):
        compare_outputs({"y": big}, {"y": big * 2})
    in_range = np.array([1.0, 2.0], np.longdouble)
    assert compare_outputs({"y": in_range}, {"y": in_range}).passed


@pytest.mark.skipif(np.finfo(np.longdouble).tiny >= np.finfo(np.float64).tiny, reason="no x87")
def test_long_double_below_float64_is_refused_not_passed_as_zero():
    tiny = np.array([0.0, np.longdouble("1e-400")])
    message = r"below float64's smallest subnormal \(they become 0\), e\.g\. .*1e-400.* at \(1,\)"
    with pytest.raises(InvalidOutputError, match=message):
        compare_outputs({"y": tiny}, {"y": np.zeros(2)}, atol=0, rtol=0)
    with pytest.raises(InvalidOutputError, match=r"output 'y' \(expected\)"):
        compare_outputs({"y": np.zeros(2)}, {"y": tiny}, atol=0, rtol=0)
    subnormal = np.array([np.longdouble("1e-310")])  # a float64 subnormal: kept
    assert not compare_outputs({"y": subnormal}, {"y": np.zeros(1)}, atol=0, rtol=0).passed


def test_a_nested_torch_tensor_is_refused_with_what_to_pass():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # nested tensors are a prototype and warn so
        nested = torch.nested.nested_tensor([torch.ones(2), torch.ones(3)])
    message = (
        r"output 'y' \(actual\) is a nested \(ragged\) torch tensor: pass list\(tensor\.unbind"
    )
    with pytest.raises(InvalidOutputError, match=message):
        compare_outputs({"y": nested}, {"y": ONES})
    unbound = list(nested.unbind())  # what the message says to pass: a sequence output
    expected = [np.ones(2, np.float32), np.ones(3, np.float32)]
    assert compare_outputs({"y": unbound}, {"y": expected}).passed


@pytest.mark.parametrize(
    ("names", "message"),
    [
        (5, r"names=5 \(int\): takes an output name or a list of output names"),
        ({"y": 1}, r"names=\{'y': 1\} \(dict\): takes an output name or a list"),
        ([None], r"names=\[None\]: takes output names \(str\)"),
    ],
)
def test_names_that_are_not_output_names_are_refused(names, message):
    with pytest.raises(InvalidOutputError, match=message):
        compare_outputs({"y": ONES}, {"y": ONES}, names=names)


def test_nothing_to_compare_is_an_error_not_a_pass():
    with pytest.raises(InvalidOutputError, match=r"no array to compare: 'y' is empty \(None"):
        compare_outputs({"y": None}, {"y": None})
    with pytest.raises(InvalidOutputError, match=r"'a', 'b' are empty"):
        compare_outputs({"a": None, "b": None}, {"a": None, "b": None})
    with pytest.raises(InvalidOutputError, match=r"have no outputs: nothing to compare"):
        compare_outputs({}, {})
    with pytest.raises(InvalidOutputError, match=r"actual must be a mapping .* got NoneType"):
        compare_outputs(None, None)
    # beside an array, an optional empty on both sides passes (ONNX optional outputs)
    assert compare_outputs({"o": None, "y": ONES}, {"o": None, "y": ONES}).passed
    # empty on one side only is a failure that says so
    assert compare_outputs({"y": None}, {"y": ONES}).outputs["y"].problem == (
        "empty optional, expected tensor"
    )


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"nan_equal": "false"}, r"nan_equal must be True or False, got 'false' \(str\)"),
        ({"inf_equal": 1}, r"inf_equal must be True or False, got 1 \(int\)"),
        ({"quantile": None}, r"quantile must be a number, got None \(NoneType\)"),
        ({"atol": "1e-3"}, r"atol must be a number, got '1e-3' \(str\)"),
        ({"rtol": True}, r"rtol must be a number, got True \(bool\)"),
        ({"check": None}, r"check=None is not one of elemwise"),
        ({"index_tolerance": 1.5}, r"index_tolerance must be an int, got 1.5"),
    ],
)
def test_tolerance_fields_of_the_wrong_type_are_one_clear_error(fields, message):
    with pytest.raises(ToleranceError, match=message):
        Tolerance(**fields)


def test_numpy_numbers_are_numbers_in_a_tolerance():
    tolerance = Tolerance(
        atol=np.float32(0.5),
        rtol=np.float64(0.25),
        quantile=np.float16(0.5),
        index_tolerance=np.int64(2),
        nan_equal=np.bool_(True),
    )
    assert (tolerance.atol, tolerance.rtol, tolerance.quantile) == (0.5, 0.25, 0.5)
    assert type(tolerance.index_tolerance) is int and tolerance.nan_equal is True


@pytest.mark.parametrize("spec", ["1e-3", 1e-3, 3])
def test_a_tolerance_that_is_not_a_tolerance_says_what_it_takes(spec):
    with pytest.raises(
        ToleranceError, match=r"tolerance must be a Tolerance, a dict of its fields"
    ):
        compare_outputs({"y": ONES}, {"y": ONES}, spec)


def test_a_misspelt_field_in_a_tolerance_dict_says_so():
    with pytest.raises(
        ToleranceError, match=r"'atl' is not a tolerance field; did you mean 'atol'"
    ):
        compare_outputs({"y": ONES}, {"y": ONES}, {"atl": 1e-3})

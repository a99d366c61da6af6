"""What the engine accepts and refuses, with the one-line message a user gets (issue 10, 7)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch

from pytest_trtcompare import Tolerance, compare_outputs
from pytest_trtcompare.errors import InvalidOutputError, ToleranceError

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
    with pytest.raises(InvalidOutputError, match=r"beyond float64's range \(e\.g\. at \(1,\)\)"):
        compare_outputs({"y": big}, {"y": big * 2})
    in_range = np.array([1.0, 2.0], np.longdouble)
    assert compare_outputs({"y": in_range}, {"y": in_range}).passed


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

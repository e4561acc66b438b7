"""One record for how a model is sized (issue 45): `analyze(model, hw, Sizing(...))`, the record
passed whole to the stages that read it, and the former keywords kept for one release with a
DeprecationWarning that names the new form."""

from __future__ import annotations

import dataclasses
import inspect
import pickle
import warnings

import pytest

import onnx_roofline as r
from onnx_roofline import analysis
from onnx_roofline.errors import DimensionError
from onnx_roofline.shapes import engine
from onnx_roofline.shapes.routing import ExpertLoad
from onnx_roofline.shapes.sizing import FIELDS, REMOVED_IN, Sizing
from tests.conftest import FIXTURES

DECODE = FIXTURES / "gpt2_decode_fp16.onnx"
DIMS = {"batch": 2, "past_sequence": 127}


def test_the_record_and_the_former_keywords_give_one_report():
    new = r.analyze(DECODE, "h100", Sizing(dims=DIMS))
    with pytest.warns(
        DeprecationWarning, match=r"analyze\(dims=\.\.\.\) is deprecated .* pass sizing=Sizing\(dims=\.\.\.\)"
    ) as caught:
        old = r.analyze(DECODE, "h100", dims=DIMS)
    assert old.to_dict() == new.to_dict()
    assert caught[0].filename == __file__  # said where the caller wrote it, not inside the package
    assert REMOVED_IN in str(caught[0].message)


def test_a_dims_mapping_in_the_sizings_place_still_works_with_the_warning():
    with pytest.warns(DeprecationWarning, match="sizing=Sizing"):
        old = r.analyze(DECODE, "h100", DIMS)
    assert old.model.dims == r.analyze(DECODE, "h100", Sizing(dims=DIMS)).model.dims


def test_the_new_form_warns_nothing():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        r.analyze(DECODE, "h100", Sizing(dims=DIMS), precision="fp8")


@pytest.mark.parametrize("call, message", [
    (lambda: r.analyze(DECODE, "h100", Sizing(dims=DIMS), dims=DIMS), "give the sizing once"),
    (lambda: r.analyze(DECODE, "h100", DIMS, dims=DIMS), "got dims twice"),
    (lambda: r.analyze(DECODE, "h100", dimz=DIMS), "unexpected keyword argument 'dimz'"),
    (lambda: r.analyze(DECODE, "h100", 8), "sizing must be an onnx_roofline.Sizing"),
])  # fmt: skip
def test_a_sizing_given_wrong_is_a_type_error(call, message):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        with pytest.raises(TypeError, match=message):
            call()


def test_the_record_is_checked_when_made_frozen_and_travels():
    with pytest.raises(DimensionError, match="is not a whole number"):
        Sizing(dims={"batch": "8"})
    with pytest.raises(ValueError, match=r"must be in \[0, 1\]"):
        Sizing(nonzero_fraction=1.5)
    for length in (0, -4, 2.5, True):  # a string's bytes: a positive whole number
        with pytest.raises(ValueError, match="positive whole number"):
            Sizing(string_bytes=length)
    sizing = Sizing(dims={"batch": 4}, input_shapes={"x": [1, 2]}, expert_load="skew=2")
    assert sizing.input_shapes == {"x": (1, 2)} and sizing.expert_load == ExpertLoad.parse("skew=2")
    with pytest.raises(dataclasses.FrozenInstanceError):
        sizing.dims = {}  # type: ignore[misc]
    assert pickle.loads(pickle.dumps(sizing)) == sizing
    assert sizing.bound({"sequence": 8}).dims == {"batch": 4, "sequence": 8} and sizing.dims == {"batch": 4}


def test_no_stage_between_analyze_and_the_readers_names_a_sizing_field():
    """An assumption added to Sizing touches its record and its reader, not the signatures between:
    the analysis, the binding, the shape engine and the walk take the record whole."""
    between = [
        analysis._analyze,
        analysis.bind_and_infer,
        engine.infer,
        engine.infer_body,
        analysis._Walk.__init__,
        engine._Sweep.__init__,
    ]
    for function in between:
        table = (
            {"values"} if function in (analysis._Walk.__init__, engine._Sweep.__init__) else set()
        )  # a value table (every tensor's type), not Sizing.values
        named = set(inspect.signature(function).parameters) & set(FIELDS) - table
        assert not named, f"{function.__qualname__} takes {sorted(named)}: pass the Sizing"
    public = inspect.signature(analysis.analyze).parameters
    assert [name for name in public if public[name].kind is not inspect.Parameter.VAR_KEYWORD] == [
        "model", "hw", "sizing", "partial", "precision", "fp32_matmul"]  # fmt: skip

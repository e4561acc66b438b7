"""A report crosses a process boundary whole: pickled and unpickled it is an equal report with
the same JSON object, both views, for every fixture; and `analyze` mapped over a process pool (as
Ray, Dask or Spark map it) hands back report objects, not dicts."""

from __future__ import annotations

import multiprocessing
import pickle
from concurrent.futures import ProcessPoolExecutor

import pytest

import onnx_roofline as r
from onnx_roofline import Sizing
from onnx_roofline.report.serialize import render_json
from onnx_roofline.views.deployed import deploy
from tests.conftest import FIXTURES

ALL_FIXTURES = sorted(p.name for p in FIXTURES.glob("*.onnx"))


def _round_trip(value):
    return pickle.loads(pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL))


@pytest.mark.parametrize("fixture", ALL_FIXTURES)
def test_each_fixture_report_pickles_to_an_equal_report(fixture):
    written = r.analyze(FIXTURES / fixture, sizing=Sizing(default_dims=True))
    deployed = deploy(written, "copy")
    for report in (written, deployed):
        back = _round_trip(report)
        assert back == report
        assert back.to_dict() == report.to_dict()
        assert render_json(back) == render_json(report)  # the public JSON text, byte for byte
        assert back.nodes[0].proto == report.nodes[0].proto  # the graph node travels with its row
    back = _round_trip(deployed)
    assert back.written == written and back.written.to_dict() == written.to_dict()  # the view it was made from


def test_hardware_pickles_with_its_read_only_tables():
    hardware = r.analyze(FIXTURES / "resnet50_fp16.onnx", hw="h100", sizing=Sizing(dims={"batch": 1})).hardware
    back = _round_trip(hardware)
    assert back == hardware and back.to_dict() == hardware.to_dict()
    assert back.figure_source("matrix", "fp16") == hardware.figure_source(
        "matrix", "fp16"
    )  # sources: not compared, kept
    with pytest.raises(TypeError):
        back.peaks["matrix"]["fp16"] = 0.0  # frozen again, as read from the spec


def test_analyze_in_a_process_pool_returns_whole_reports():
    jobs = {"resnet50_fp16.onnx": {"batch": 1}, "gpt2_decode_fp16.onnx": {"batch": 1, "past_sequence": 1023}}
    # spawn: fresh interpreters, as a cluster's workers are, with nothing inherited from this one
    with ProcessPoolExecutor(max_workers=2, mp_context=multiprocessing.get_context("spawn")) as pool:
        futures = {
            name: pool.submit(r.analyze, str(FIXTURES / name), hw="h100", sizing=Sizing(dims=dims))
            for name, dims in jobs.items()
        }
        reports = {name: future.result() for name, future in futures.items()}
    for name, dims in jobs.items():
        here = r.analyze(str(FIXTURES / name), hw="h100", sizing=Sizing(dims=dims))
        assert isinstance(reports[name], r.Report)
        assert reports[name] == here and reports[name].to_dict() == here.to_dict()
        assert reports[name].totals == here.totals


def test_dask_maps_analyze_over_processes_and_hands_back_reports():
    """The README's Dask example (the `distributed` extra): the local process scheduler, whose
    workers are fresh interpreters fed by cloudpickle, returns report objects equal to those made here."""
    dask = pytest.importorskip("dask")
    paths = [FIXTURES / "resnet50_fp16.onnx", FIXTURES / "gpt2_prefill_fp16.onnx"]
    tasks = [dask.delayed(r.analyze)(str(path), hw="h100", sizing=Sizing(default_dims=True)) for path in paths]
    reports = dask.compute(*tasks, scheduler="processes", num_workers=2)
    for path, report in zip(paths, reports, strict=True):
        assert isinstance(report, r.Report)
        assert report.to_dict() == r.analyze(str(path), hw="h100", sizing=Sizing(default_dims=True)).to_dict()

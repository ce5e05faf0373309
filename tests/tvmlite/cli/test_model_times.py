"""The summary's latency lines: speedups worded both ways, onnxruntime optional."""
from __future__ import annotations

import sys

from tvmlite.cli import model_times
from tvmlite.cli.model_times import ModelTimes, format_latency, times_lines


def test_latency_lines_word_speedups_and_a_missing_peer(monkeypatch, tmp_path):
    assert format_latency(2.714e-6) == "2.71 us" and format_latency(0.01234) == "12.34 ms"
    lines = times_lines(ModelTimes(1e-3, 2.5e-3, 0.8e-3, "", 2, 25, 0.9e-3, 2e-3))
    assert lines[0] == ("model:    1 ms tuned (median of 25 runs of the library, 2 thread(s); "
                        "min 900 us)")
    assert lines[1].startswith("untuned:  2.5 ms (min 2 ms; ")
    assert "tuned is 2.50x faster" in lines[1] and "tuned is 1.25x slower" in lines[2]
    assert len(lines) == 3
    lines = times_lines(ModelTimes(2e-3, 1e-3, None, "onnxruntime is not installed", 2, 25))
    assert "tuned is 2.00x slower" in lines[1]
    assert lines[2] == "onnxruntime: not compared: onnxruntime is not installed"
    assert "raise --trials" in lines[3]          # slower than the defaults: says why
    monkeypatch.setitem(sys.modules, "onnxruntime", None)     # import fails: not installed
    timer, note = model_times.ort_timer(tmp_path / "m.onnx", {}, 2)
    assert timer is None and "pip install onnxruntime" in note


def test_latency_lines_of_a_symbolic_model_name_the_size():
    lines = times_lines(ModelTimes(1e-3, 2e-3, None, "onnxruntime is not installed", 2, 25,
                                   at="L=23"))
    assert lines[0].startswith("model:    L=23: 1 ms tuned (median of 25 runs")
    assert lines[1].startswith("untuned:  L=23: 2 ms (")
    assert lines[2] == "onnxruntime: L=23: not compared: onnxruntime is not installed"

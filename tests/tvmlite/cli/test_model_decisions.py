"""The whole-graph decisions on the command line: ``tvmlite compile --layout/--split``
print what was chosen and build a library that gives onnxruntime's outputs; ``tvmlite
tune MODEL.onnx --layout auto`` measures the layout before extracting the tasks, says so
in the summary's header and pins it in the compile and resume commands."""
from __future__ import annotations

import shlex

import pytest

onnx = pytest.importorskip("onnx")

from tvmlite.cli.commands import main  # noqa: E402
from tvmlite.cli.model_decisions import packed_tasks, packs, tune_decision_lines  # noqa: E402
from tvmlite.cli.model_tune import pin_layout  # noqa: E402
from tvmlite.cli.progress import Progress  # noqa: E402
from tvmlite.frontend import from_onnx  # noqa: E402
from tvmlite.graph.build import build_graph  # noqa: E402
from tvmlite.graph.decisions import GraphDecisions, optimize_in  # noqa: E402
from tvmlite.graph.library import ModelLibrary  # noqa: E402
from tvmlite.search.graph_tasks import extract_tasks  # noqa: E402
from tvmlite.target.target import Target  # noqa: E402

QUICK = ("--population", "8", "--batch", "2", "--no-pretrained")


def _run(capsys, *argv):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture()
def silu_file(tmp_path, silu_conv_model):
    path = tmp_path / "silu.onnx"
    onnx.save(silu_conv_model[0], str(path))
    return path


def test_compile_layout_given_and_splits_measured(capsys, tmp_path, silu_file, silu_conv_model,
                                           outputs_close):
    _, feeds, ref = silu_conv_model
    code, out, err = _run(capsys, "compile", silu_file, "--out", tmp_path / "a", "--layout",
                          "nchw")
    assert code == 0, err
    assert "layout:   NCHW (given)" in out and "split:    not measured" in out
    assert "weights:  pre-packed at load time in " in out
    assert outputs_close(ModelLibrary(tmp_path / "a").run(feeds), ref)
    code, out, err = _run(capsys, "compile", silu_file, "--out", tmp_path / "b", "--split",
                          "auto", "--layout", "nhwc")    # the measured layout: tune's test
    assert code == 0, err
    assert "layout:   NHWC (given)" in out and "heavy fused kernel(s) split back" in out
    assert outputs_close(ModelLibrary(tmp_path / "b").run(feeds), ref)


def test_tune_measures_the_layout_and_pins_it(capsys, monkeypatch, tmp_path, silu_file):
    """Interrupted at its first trial (the summary of a whole run is test_model_tune's):
    the layout was measured before the tasks, and the resume command pins it."""
    def interrupt(self, trial):
        raise KeyboardInterrupt
    monkeypatch.setattr(Progress, "__call__", interrupt)
    code, _, err = _run(capsys, "tune", silu_file, "--trials", 4, "--log",
                        tmp_path / "t.jsonl", "--layout", "auto", *QUICK)
    assert code == 130, err
    header = next(ln for ln in err.splitlines() if ln.startswith("layout:   "))
    assert "(measured " in header
    chosen = header.split()[1].lower()
    again = shlex.split(err.strip().splitlines()[-1].removeprefix("resume:"))
    assert again[-3:] == ["--layout", chosen, "--resume"] and "auto" not in again


def test_resume_pins_the_layout_and_operators_refuse_it(capsys):
    assert pin_layout(["tune", "m.onnx", "--layout", "auto", "--trials", "4"], "NCHW") == [
        "tune", "m.onnx", "--trials", "4", "--layout", "nchw"]
    assert pin_layout(["tune", "m.onnx", "--layout=auto"], "NHWC")[-2:] == ["--layout", "nhwc"]
    code, _, err = _run(capsys, "tune", "matmul", "M=4", "N=4", "K=4", "--trials", "1",
                        "--log", "x.jsonl", "--layout", "nchw")
    assert code == 2 and "--layout chooses a model's activation layout" in err


def test_tune_header_names_the_packing_the_build_does(tmp_path, silu_conv_model):
    """Without records, the tasks' default schedules pack exactly where the default
    build's kernels do."""
    g = optimize_in(from_onnx(silu_conv_model[0]), "NHWC")
    tasks = extract_tasks(g)
    built = build_graph(g, quiet=True)
    expect = [k.name for k in built.kernels if k.code.packs]
    assert expect and packed_tasks(tasks, tmp_path / "none.jsonl", Target.host()) == expect
    lines = tune_decision_lines(GraphDecisions("NHWC", "given"), tasks, tmp_path / "none.jsonl",
                                Target.host())
    assert lines[0] == "layout:   NHWC (given)"
    assert lines[1].startswith(f"weights:  pre-packed at load time by {len(expect)} of "
                               f"{len(tasks)} task(s)' schedules")
    assert not packs([])

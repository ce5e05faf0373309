"""The whole-graph decisions on the command line: ``tvmlite compile --layout/--split``
print what was chosen and build a library that gives onnxruntime's outputs; ``tvmlite
tune MODEL.onnx --layout auto`` measures the layout before extracting the tasks, says so
in the summary's header and pins it in the compile and resume commands; ``--split auto``
splits before the tasks too, and the compile under its log builds the side it tuned."""
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
    code, _, err = _run(capsys, "tune", "matmul", "M=4", "N=4", "K=4", "--trials", "1",
                        "--log", "x.jsonl", "--split", "auto")
    assert code == 2 and "--split splits a model's fused kernels" in err


def test_tune_splits_before_the_tasks_and_compile_builds_what_was_tuned(
        capsys, monkeypatch, tmp_path, silu_file, silu_conv_model, outputs_close):
    """``--split auto``: the split measured on default kernels before the tasks exist (a
    timer here that finds the fused conv slow), in the summary's header; the tasks are
    its parts; the printed compile command passes --split auto, and the compile, timing
    for real, builds the side the log tuned and says so."""
    from tvmlite.graph import decisions

    def fused_conv_slow(config=None):
        def timer(mods, feeds):
            return [{k.name: 1e-2 if i == 0 and k.name.endswith("_conv") else 1e-3
                     for k in m.kernels} for i, m in enumerate(mods)]
        return timer
    _, feeds, ref = silu_conv_model
    log = tmp_path / "s.jsonl"
    with monkeypatch.context() as m:
        m.setattr(decisions, "interleaved_kernel_timer", fused_conv_slow)
        code, out, err = _run(capsys, "tune", silu_file, "--trials", 4, "--log", log,
                              "--layout", "nhwc", "--split", "auto", *QUICK)
    assert code == 0, err
    header = next(ln for ln in out.splitlines() if ln.startswith("split:    "))
    assert header.startswith("split:    1 of 1 heavy fused kernel(s) split back"), header
    assert "_epilogue" in out                   # a part of the split is a task
    command = next(ln for ln in out.splitlines() if ln.startswith("compile:  "))
    argv = shlex.split(command.removeprefix("compile:  "))
    assert argv[argv.index("--split") + 1] == "auto"
    argv[argv.index("--out") + 1] = str(tmp_path / "dist")
    code, out, err = _run(capsys, *argv[1:])
    assert code == 0, err
    line = next(ln for ln in out.splitlines() if ln.startswith("split:    "))
    assert line.startswith("split:    1 of 1") and "1 as the log tuned them" in line, line
    assert outputs_close(ModelLibrary(tmp_path / "dist").run(feeds), ref)


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

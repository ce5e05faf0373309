"""A BERT encoder layer over sequence lengths LO..HI: one tuning for the whole range
against tunings for each length alone (issue 30 item 4's goal: every length within 0.9x
of a model tuned for it alone, in a third of the time of tuning 8 lengths one by one).

1. ``dynamic``: the layer imported with ``shapes={"x": (1, (lo, hi), hidden)}`` (its
   reshapes use -1, so the length is the model's own); its kernels over the length are
   dynamic tasks, the rest static, tuned under one budget by ``search.budget.tune_model``
   (``--dynamic-trials``; default: ``--trials-per-task`` x the tasks x 3, the
   measurements of three per-length tunings);
2. ``per-length``: for each of ``--lengths`` lengths (log-spaced in the range, odd), the
   layer imported at that length and its tasks tuned by the TaskScheduler with
   ``--trials-per-task`` x its tasks;
3. at each length, in this process, interleaved rounds, medians of ``--repeat``: the
   dynamic model built from its log, the per-length model built from its own, the
   untuned dynamic model, and onnxruntime (CPU provider, ``--threads`` intra-op threads).

Prints a table (latency per contender, the dynamic/per-length ratio) and the two tuning
wall times, and writes ``<out>/results.json``. A figure needs a quiet machine; ``--quick``
is a smoke run (a 32-wide layer over 1..16, two lengths, a few trials).

    python -m bench models-dynamic [--hidden 768] [--heads 12] [--lo 1] [--hi 512]
        [--lengths 8] [--trials-per-task 64] [--dynamic-trials N] [--repeat 25]
        [--threads 2] [--out bench/out/models-dynamic] [--quick]
"""
from __future__ import annotations

import argparse
import json
import math
import statistics
import time
from pathlib import Path
from typing import Any

import numpy as np

DOC = __doc__


def bert_layer(hidden: int, heads: int, seed: int = 1) -> Any:
    """One BERT-base-style encoder layer on hidden states (1, L, hidden), L symbolic:
    self-attention, residual + LayerNorm, the GELU (Erf) feed-forward, residual +
    LayerNorm -- bench/models.py's layer with reshapes to -1 instead of the length."""
    from onnx import TensorProto, helper, numpy_helper
    rng = np.random.default_rng(seed)
    inits: list = []
    nodes: list = []
    d = hidden // heads

    def weight(*shape: int, scale: float | None = None, positive: bool = False) -> str:
        v = rng.uniform(0.5, 1.5, shape) if positive else \
            rng.standard_normal(shape) * (scale or 1 / math.sqrt(shape[0]))
        name = f"w{len(inits)}"
        inits.append(numpy_helper.from_array(v.astype(np.float32), name))
        return name

    def const(v: Any, dtype: Any = np.float32) -> str:
        name = f"c{len(inits)}"
        inits.append(numpy_helper.from_array(np.asarray(v, dtype), name))
        return name

    def op(t: str, ins: list, **attrs: Any) -> str:
        out = f"{t.lower()}{len(nodes)}"
        nodes.append(helper.make_node(t, ins, [out], name=out, **attrs))
        return out

    def dense(x: str, cin: int, cout: int) -> str:
        return op("Add", [op("MatMul", [x, weight(cin, cout)]), weight(cout, scale=0.1)])

    def split_heads(x: str, perm: list[int]) -> str:
        r = op("Reshape", [x, const([1, -1, heads, d], np.int64)])
        return op("Transpose", [r], perm=perm)
    q = split_heads(dense("x", hidden, hidden), [0, 2, 1, 3])
    k = split_heads(dense("x", hidden, hidden), [0, 2, 3, 1])
    v = split_heads(dense("x", hidden, hidden), [0, 2, 1, 3])
    att = op("Div", [op("MatMul", [q, k]), const(math.sqrt(d))])
    ctx = op("MatMul", [op("Softmax", [att], axis=-1), v])
    ctx = op("Reshape", [op("Transpose", [ctx], perm=[0, 2, 1, 3]),
                         const([1, -1, hidden], np.int64)])
    x1 = op("LayerNormalization", [op("Add", [dense(ctx, hidden, hidden), "x"]),
                                   weight(hidden, positive=True), weight(hidden, scale=0.1)],
            axis=-1)
    h = dense(x1, hidden, 4 * hidden)
    gelu = op("Mul", [op("Mul", [h, op("Add", [op("Erf", [op("Div", [
        h, const(math.sqrt(2.0))])]), const(1.0)])]), const(0.5)])
    out = op("LayerNormalization", [op("Add", [dense(gelu, 4 * hidden, hidden), x1]),
                                    weight(hidden, positive=True), weight(hidden, scale=0.1)],
             axis=-1)
    g = helper.make_graph(nodes, "bert_layer_dyn",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                         [1, "L", hidden])],
                          [helper.make_tensor_value_info(out, TensorProto.FLOAT, None)], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m


def eval_lengths(lo: int, hi: int, n: int) -> list[int]:
    """``n`` lengths log-spaced over [lo, hi], odd where they can be (a power of two
    fits every tile; most real lengths do not), the ends included."""
    if n <= 1:
        return [hi]
    out = []
    for i in range(n):
        m = round(math.exp(math.log(lo) + (math.log(hi) - math.log(lo)) * i / (n - 1)))
        if 0 < i < n - 1 and m % 2 == 0:
            m += 1
        out.append(min(hi, max(lo, m)))
    return sorted(set(out))


def _median_times(timers: list, rounds: int) -> list[float]:
    """Each timer's median over ``rounds`` interleaved rounds (a burst of other work
    hits all contenders alike); a timer returns the seconds of one run."""
    times: list[list[float]] = [[] for _ in timers]
    for _ in range(rounds):
        for i, timer in enumerate(timers):
            times[i].append(timer())
    return [statistics.median(t) for t in times]


def _ort_timer(sess: Any, feeds: dict) -> Any:
    def timer() -> float:
        t0 = time.perf_counter()
        sess.run(None, feeds)
        return time.perf_counter() - t0
    return timer


def main(argv: list[str] | None = None) -> int:
    import onnx
    import onnxruntime as ort

    from tvmlite import search
    from tvmlite.frontend import from_onnx
    from tvmlite.graph.build import build_graph
    from tvmlite.search.budget import tune_model
    from tvmlite.search.options import TuningOptions
    from tvmlite.target.target import Target

    p = argparse.ArgumentParser(prog="python -m bench models-dynamic",
                                description=DOC.strip().splitlines()[0])
    p.add_argument("--hidden", type=int, default=768)
    p.add_argument("--heads", type=int, default=12)
    p.add_argument("--lo", type=int, default=1)
    p.add_argument("--hi", type=int, default=512)
    p.add_argument("--lengths", type=int, default=8, help="lengths tuned one by one")
    p.add_argument("--trials-per-task", type=int, default=64)
    p.add_argument("--dynamic-trials", type=int, default=None)
    p.add_argument("--population", type=int, default=None)
    p.add_argument("--repeat", type=int, default=25)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--out", type=Path, default=None)
    p.add_argument("--quick", action="store_true", help="a smoke run: a 32-wide layer over "
                   "1..16, two lengths, one trial per task")
    a = p.parse_args(argv)
    if a.quick:
        a.hidden, a.heads, a.hi, a.lengths, a.trials_per_task, a.repeat = 32, 2, 16, 2, 1, 3
        a.population = a.population or 8
    out = a.out or Path("bench/out/models-dynamic" + ("-quick" if a.quick else ""))
    out.mkdir(parents=True, exist_ok=True)
    target = Target.host()
    options = TuningOptions(population=a.population) if a.population else TuningOptions()
    model = bert_layer(a.hidden, a.heads)
    path = out / "bert_layer_dyn.onnx"
    onnx.save(model, str(path))

    graph = from_onnx(path, shapes={"x": (1, (a.lo, a.hi), a.hidden)})
    tasks = search.extract_tasks(graph, target)
    dyn_trials = a.dynamic_trials or a.trials_per_task * len(tasks) * 3
    dyn_trials = max(dyn_trials, sum(len(t.sizes) if t.dynamic else 1 for t in tasks))
    dyn_log = out / "dynamic.jsonl"
    dyn_log.unlink(missing_ok=True)
    t0 = time.perf_counter()
    tune_model(tasks, dyn_trials, str(dyn_log), options)   # static + dynamic, one budget
    dyn_seconds = time.perf_counter() - t0
    untuned = build_graph(graph, target, quiet=True)
    with search.apply_history_best(str(dyn_log)):
        dynamic = build_graph(graph, target, quiet=True)

    sess_opts = ort.SessionOptions()
    sess_opts.intra_op_num_threads = a.threads
    sess = ort.InferenceSession(model.SerializeToString(), sess_opts,
                                providers=["CPUExecutionProvider"])
    rows, per_seconds = [], 0.0
    for length in eval_lengths(a.lo, a.hi, a.lengths):
        g1 = from_onnx(path, shapes={"x": (1, length, a.hidden)})
        t1 = search.extract_tasks(g1, target)
        log = out / f"length-{length}.jsonl"
        log.unlink(missing_ok=True)
        t0 = time.perf_counter()
        search.TaskScheduler(t1).tune(a.trials_per_task * len(t1), str(log), options)
        per_seconds += time.perf_counter() - t0
        with search.apply_history_best(str(log)):
            alone = build_graph(g1, target, quiet=True)
        x = np.random.default_rng(length).standard_normal((1, length, a.hidden)).astype(
            np.float32)
        feeds = {"x": x}
        want = sess.run(None, feeds)[0]
        for m in (dynamic, alone, untuned):
            np.testing.assert_allclose(m.run(feeds)[0], want, rtol=2e-3, atol=2e-3)
        runs = [_timer(m, feeds) for m in (dynamic, alone, untuned)]
        runs.append(_ort_timer(sess, feeds))
        t_dyn, t_alone, t_untuned, t_ort = _median_times(runs, a.repeat)
        rows.append({"length": length, "dynamic_ms": t_dyn * 1e3, "per_length_ms":
                     t_alone * 1e3, "untuned_ms": t_untuned * 1e3, "ort_ms": t_ort * 1e3,
                     "dynamic_vs_per_length": t_alone / t_dyn})
    print(f"BERT layer hidden {a.hidden}, {a.heads} heads, L in [{a.lo}, {a.hi}] on "
          f"{target.name or target.arch}, {a.threads} threads (ort), medians of {a.repeat}")
    print(f"{'L':>5} {'dynamic':>10} {'per-length':>11} {'untuned':>10} {'ort':>10}  "
          f"per-length/dynamic")
    for r in rows:
        print(f"{r['length']:>5} {r['dynamic_ms']:>8.3f}ms {r['per_length_ms']:>9.3f}ms "
              f"{r['untuned_ms']:>8.3f}ms {r['ort_ms']:>8.3f}ms  "
              f"{r['dynamic_vs_per_length']:.2f}x")
    print(f"tuning: dynamic {dyn_seconds:.0f}s ({dyn_trials} trials, {len(tasks)} tasks) vs "
          f"per-length {per_seconds:.0f}s ({len(rows)} lengths x {a.trials_per_task} "
          f"trials/task): {dyn_seconds / max(per_seconds, 1e-9):.2f}x the time")
    result = {"hidden": a.hidden, "heads": a.heads, "lo": a.lo, "hi": a.hi,
              "dynamic_trials": dyn_trials, "trials_per_task": a.trials_per_task,
              "dynamic_seconds": dyn_seconds, "per_length_seconds": per_seconds,
              "rows": rows, "quick": a.quick}
    (out / "results.json").write_text(json.dumps(result, indent=1) + "\n")
    return 0


def _timer(mod: Any, feeds: dict) -> Any:
    """The seconds of one whole run of a built model (``time_evaluator``: its buffers
    made and one warm-up run before the timed one)."""
    evaluate = mod.time_evaluator(number=1, repeat=1)
    return lambda: evaluate(feeds).results[0]


if __name__ == "__main__":
    raise SystemExit(main())

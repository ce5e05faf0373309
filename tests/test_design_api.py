"""The user-facing API of DESIGN.md, as written there (small sizes, few trials)."""
import subprocess
import sys

import numpy as np


def test_the_design_example_runs(tmp_path):
    import tvmlite
    from tvmlite import search, te

    M = N = K = 32
    A = te.placeholder((M, K), name="A")
    B = te.placeholder((K, N), name="B")
    k = te.reduce_axis((0, K), name="k")
    C = te.compute((M, N), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
    s = te.create_schedule(C.op)
    i, j = s[C].op.axis
    io, jo, ii, ji = s[C].tile(i, j, 8, 16)
    ko, ki = s[C].split(k, factor=4)
    s[C].reorder(io, jo, ko, ii, ki, ji)
    s[C].vectorize(ji)
    s[C].unroll(ki)
    s[C].parallel(io)
    assert "ramp(" in str(tvmlite.lower(s, [A, B, C]))        # the vectorized loop
    mod = tvmlite.build(s, [A, B, C])
    a, b = np.random.rand(M, K).astype("float32"), np.random.rand(K, N).astype("float32")
    a, b, c = tvmlite.asaligned(a), tvmlite.asaligned(b), tvmlite.empty((M, N), "float32")
    mod(a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-5, atol=1e-5)
    assert mod.time_evaluator(number=2, repeat=2)(a, b, c).median > 0
    mod.export_library(str(tmp_path / "matmul.so"))
    assert (tmp_path / "matmul.h").is_file()

    quick = search.TuningOptions(population=16, generations=1, measures_per_round=4,
                                 min_repeat_ms=1)
    task = search.SearchTask(func=tvmlite.ops.matmul, args=(M, N, K, "float32"))
    task.tune(trials=4, log_file=str(tmp_path / "matmul.jsonl"), options=quick)
    s, args = task.apply_best(str(tmp_path / "matmul.jsonl"))
    tvmlite.testing.check_schedule(s, args, lambda x, y: x @ y, rtol=1e-4, atol=1e-4)

    task = search.templated.create("matmul", args=(M, N, K, "float32"))
    tuner = search.XGBTuner(task)
    tuner.tune(n_trial=4, log_file=str(tmp_path / "matmul_t.jsonl"), options=quick)
    with search.apply_history_best(str(tmp_path / "matmul_t.jsonl")):
        s, args = tvmlite.schedules.matmul(M, N, K, "float32")
    tvmlite.testing.check_schedule(s, args, lambda x, y: x @ y, rtol=1e-4, atol=1e-4)


def test_the_measuring_worker_does_not_load_the_search():
    code = ("import sys, tvmlite.search.measure.worker; "
            "print('xgboost' in sys.modules, 'tvmlite.search.templated.tuners' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.split()
    assert out == ["False", "False"]

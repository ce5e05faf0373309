"""onnx's backend node tests through tvmlite's backend, for the ops issue 29 lists.

    python -m bench onnx_node_tests [--only REGEX] [--out-of-scope] [--results PATH]

Every node test that the onnx wheel generates (``onnx.backend.test.loader``) whose
nodes (function bodies of ``_expanded`` tests included) are all ops of the issue's
list (``tvmlite.frontend.scope.LISTED_OPS``) is classified by
``tvmlite.frontend.scope.out_of_scope``: a test of an opset above 21, or with a value
of a dtype tvmlite does not have, is listed as out of scope with that reason and not
counted as a failure. Every in-scope test is run as onnx's runner runs it
(``prepare``, ``run`` on each data set, ``assert_similar_outputs`` with the test's
tolerances) and gets pass, or fail with the reason in a few words. ``--out-of-scope``
also runs the out-of-scope tests whose dtypes tvmlite has (the opsets above 21), to
say which of them would pass anyway. The table goes to
``bench/results/onnx-node-tests.md`` (and ``.json``). It is a correctness table, not a
timing: it may run on a loaded machine.
"""
from __future__ import annotations

import re
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench import results

RESULTS = results.ROOT / "bench" / "results" / "onnx-node-tests"


@dataclass(frozen=True)
class Outcome:
    """One node test: its name, ops, opset, status (pass / fail / out of scope) and why."""
    name: str
    ops: str
    opset: int
    status: str
    reason: str
    seconds: float | None


def node_cases() -> list[Any]:
    """onnx's node test cases (generated in memory by the onnx wheel)."""
    from onnx.backend.test.loader import load_node_model_tests
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return list(load_node_model_tests())


def reason_of(err: BaseException) -> str:
    """A failure in a few words: the exception's type and the first line of its message."""
    msg = str(err).strip().splitlines()
    first = next((line.strip() for line in msg if line.strip()), "")
    if isinstance(err, AssertionError):
        # numpy's assert_allclose: "Not equal to tolerance ..." then the mismatch figures
        detail = next((line.strip() for line in msg if "Mismatched" in line or
                       "shape" in line.lower() or "dtype" in line.lower()), first)
        return f"wrong result: {detail}"[:160]
    return f"{type(err).__name__}: {first}"[:160]


def run_case(case: Any) -> tuple[str, str, float]:
    """Run ``case`` as onnx's backend runner does; (status, reason, seconds)."""
    import numpy as np
    from onnx import numpy_helper
    from onnx.backend.test.runner import Runner

    from tvmlite.frontend import onnx_backend

    def array(v: Any) -> Any:   # the data sets hold arrays, numpy scalars or TensorProtos
        return numpy_helper.to_array(v) if hasattr(v, "HasField") else np.asarray(v)
    t0 = time.perf_counter()
    try:
        rep = onnx_backend.prepare(case.model)
        for inputs, expected in case.data_sets:
            got = rep.run([array(v) for v in inputs])
            Runner.assert_similar_outputs([array(v) for v in expected], got, rtol=case.rtol,
                                          atol=case.atol, model_dir=None)
    except Exception as err:   # noqa: BLE001 - whatever a test raises is a row of the table
        return "fail", reason_of(err), time.perf_counter() - t0
    return "pass", "", time.perf_counter() - t0


def survey(only: str | None, run_out_of_scope: bool) -> list[Outcome]:
    """Every node test of the listed ops, classified and (in scope) run."""
    from tvmlite.frontend.scope import model_ops, model_opset, out_of_scope, uses_only_listed
    out = []
    for case in node_cases():
        if only and not re.search(only, case.name):
            continue
        if not uses_only_listed(case.model):
            continue
        ops = ", ".join(sorted(model_ops(case.model)))
        opset = model_opset(case.model)
        why = out_of_scope(case.model)
        if why is not None:
            status, reason, secs = "out of scope", why, None
            if run_out_of_scope and why.startswith("opset"):
                ran, ran_why, secs = run_case(case)
                reason = f"{why}; would {ran}" + (f" ({ran_why})" if ran_why else "")
        else:
            status, reason, secs = run_case(case)
        print(f"{status:>12}  {case.name}  {reason}", flush=True)
        out.append(Outcome(case.name, ops, opset, status, reason, secs))
    return out


# how the tests out of scope for their opset fail, in a few words (--out-of-scope)
_FAILURE_KINDS = (
    ("is not supported (1 to", "opsets 26-28, which from_onnx refuses"),
    ("te.cast: dtype", "float8 / 4-bit / 2-bit dtypes"),
    ("dtype must be one of", "float8 / 4-bit / 2-bit dtypes"),
    ("windows are supported", "3-D pools"),
    ("dilated pools", "dilated pools"),
    ("Indices output", "MaxPool's Indices output"),
    ("Mismatched elements", "training-mode Dropout (a random mask)"),
    ("incorrect shape", "ceil_mode output size when the last window starts in the padding"),
    ("KeyError", "sequence values"),
)


def tables(outcomes: list[Outcome]) -> list[results.Table]:
    """The summary, then one row per test: failures first, then passes, then out of scope."""
    order = {"fail": 0, "pass": 1, "out of scope": 2}
    rows = sorted(outcomes, key=lambda o: (order[o.status], o.name))
    count = {s: sum(1 for o in outcomes if o.status == s) for s in order}
    scope_reasons: dict[str, int] = {}
    for o in outcomes:
        if o.status == "out of scope":
            key = o.reason.split(";")[0].split(" (")[0]
            key = re.sub(r"^opset \d+", "opset above 21", key)
            scope_reasons[key] = scope_reasons.get(key, 0) + 1
    notes = [f"Out of scope, {n}: {why}." for why, n in sorted(scope_reasons.items(),
                                                               key=lambda kv: -kv[1])]
    ran = [o for o in outcomes if o.status == "out of scope" and "; would " in o.reason]
    if ran:
        passing = sum(1 for o in ran if "; would pass" in o.reason)
        why_not: dict[str, int] = {}
        for o in ran:
            if "; would fail" in o.reason:
                how = o.reason.split("; would fail (")[1]
                key = next((short for phrase, short in _FAILURE_KINDS if phrase in how),
                           how[:60])
                why_not[key] = why_not.get(key, 0) + 1
        notes.append(f"Of the {len(ran)} tests out of scope for their opset alone, {passing} "
                     f"pass anyway; the others fail for: " + "; ".join(
                         f"{k} (x{n})" for k, n in sorted(why_not.items(), key=lambda kv: -kv[1]))
                     + ".")
    summary = results.Table(
        ("in scope", "pass", "fail", "out of scope"),
        ((count["pass"] + count["fail"], count["pass"], count["fail"], count["out of scope"]),),
        title="Summary", notes=tuple(notes))
    detail = results.Table(("test", "ops", "opset", "result", "reason", "seconds"),
                           tuple((o.name, o.ops, o.opset, o.status, o.reason, o.seconds)
                                 for o in rows), title="Every node test of the listed ops")
    return [summary, detail]


def main(argv: list[str] | None = None) -> int:
    from bench import args as bench_args
    p = bench_args.parser("onnx_node_tests", __doc__)
    p.add_argument("--only", help="run only the tests whose name matches this regex")
    p.add_argument("--out-of-scope", action="store_true",
                   help="also run the tests of opsets above 21 (to see which would pass)")
    p.add_argument("--results", type=Path, default=RESULTS,
                   help=f"results file, .md and .json (default {RESULTS}.md)")
    a = p.parse_args(argv)
    outcomes = survey(a.only, a.out_of_scope)
    md, _ = results.write(a.results, "onnx backend node tests of the listed ops",
                          tables(outcomes), name="onnx_node_tests", argv=argv or [],
                          notes=(__doc__.strip().split("\n\n")[2].replace("\n", " "),))
    failed = sum(1 for o in outcomes if o.status == "fail")
    print(f"{md}: {len(outcomes)} tests, {failed} in-scope failures")
    return 1 if failed else 0

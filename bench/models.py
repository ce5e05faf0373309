"""Whole models against every peer, untuned and tuned (issue 30, "Measure and report").

    python -m bench models [--models NAME ...] [--tuned] [--trials-per-task 64]
        [--peers ort openvino torch tvm] [--openvino-python PY] [--torch-python PY]
        [--tvm-python PY] [--tvm-mcpu CPU] [--threads 2] [--repeat 25] [--cache DIR]
        [--fresh] [--cpu NAME] [--out DIR] [--quick]
    python -m bench models --doc bench/results/models-sapphire-rapids.json

Models: ResNet-50, SqueezeNet, Inception-v1 (light zoo, seeded random weights),
MobileNet-V2 and the 2-layer BERT encoder (``bench/torch_models.py``, exported to ONNX
when a torch venv is given), optionally DenseNet-121 and a BERT-base layer
(``bench/onnx_models.py``). Contenders, each in ``--processes`` fresh processes (the
figure is the median process's, the report gives the fastest and slowest), batch 1,
``--threads`` threads, median of ``--repeat`` (>= 25 for a figure) samples, on the same
input, each output checked against onnxruntime's:

* tvmlite untuned (default schedules) and, with ``--tuned``, tuned: ``tvmlite tune
  MODEL.onnx --trials N --log L`` with N = ``--trials-per-task`` x the model's tasks (the
  goal's budget is 64), then the library built from the log, timed like the untuned one;
* tvmlite untuned at ``--precision bf16`` (``graph.passes.precision``: bf16 weights and
  activations, float32 sums; ``vdpbf16ps`` where the CPU has AVX512-BF16), beside
  OpenVINO's default precision, which is bf16 on such a CPU;
* ``ort``: onnxruntime, CPU provider, all graph optimizations (this python);
* ``openvino``: at ``INFERENCE_PRECISION_HINT`` f32, and at its default precision (named
  beside: bf16 on a CPU with AVX-512 BF16 or AMX);
* ``torch``: PyTorch eager and ``torch.compile`` (MobileNet-V2, the BERT encoder; only when
  the ONNX file was exported from the same torch module);
* ``tvm``: Apache TVM, Relax's ONNX frontend and MetaSchedule with the same total trials
  (``--tuned`` only), ``mcpu`` from ``--tvm-mcpu`` or this CPU's features
  (``peers.llvm_cpu``: under KVM LLVM may name a Sapphire Rapids "rocketlake").

Peers run by the python of their own venv: ``--X-python`` (default $TVMLITE_X_PYTHON,
else this python); one that is absent is skipped and the table says why. Their processes
have OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE unset (``peers.numpy_env``); ours keep the
environment. Everything is resumable: model files, inputs, tuning logs, TVM's work dirs
and every contender's answer are kept under ``--cache`` (default
``bench/out/models[-quick]``), so a run started again only does what is missing
(``--fresh`` re-times, keeping model files and tuning logs). Results:
``bench/results/models-<cpu>.md`` + ``.json`` (``models-quick-<cpu>`` for ``--quick``);
``--doc RESULTS.json`` writes their tables into docs/benchmarks.md. ``--quick`` is a smoke
run: the toy MobileNet-V2 and BERT encoder, 2 trials per task, 3 repeats, and TVM only
when ``--peers`` names it (its build workers take ~20 s each to start: 18 trials of the
toy encoder took 11 minutes here).
"""
from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from bench import args as bench_args
from bench import model_worker, models_report, onnx_models, peers, results

PEERS = ("ort", "openvino", "torch", "tvm")
DEFAULT_MODELS = ("resnet50", "squeezenet", "inception_v1", "mobilenet_v2", "bert_encoder")
QUICK_MODELS = ("mobilenet_v2", "bert_encoder")
TUNE_TIMEOUT = 24 * 3600


def peer_python(name: str) -> str:
    return os.environ.get(f"TVMLITE_{name.upper()}_PYTHON", sys.executable)


def across_processes(answers: list[dict]) -> dict:
    """One contender's answer from its fresh processes: the first's, with ``seconds`` the
    median of the processes' medians and ``process_seconds`` each of them. On a VM whose
    second core comes and goes, one process's median can be 2x the next's (the BERT
    encoder under TVM: 3.2-7.1 ms), which many samples inside it do not average out.
    A process that failed makes the answer its error."""
    failed = [a for a in answers if "error" in a or "seconds" not in a]
    if failed:
        return failed[0]
    each = [float(a["seconds"]) for a in answers]
    return {**answers[0], "seconds": statistics.median(each), "process_seconds": each}


class Run:
    """One benchmark run: the options, and each (model, contender) answer, read from the
    cache when an earlier run left it, else measured in a fresh process and cached."""

    def __init__(self, a: argparse.Namespace):
        self.a = a
        self.cache: Path = a.cache
        self.threads: int = a.threads

    def log(self, msg: str) -> None:
        print(msg, file=sys.stderr, flush=True)

    def cached(self, path: Path, settings: dict, measure: Any, tuning: bool = False) -> dict:
        """``measure()``'s answer, kept at ``path`` with the ``settings`` it was taken
        at; reused while they match (and, unless it is a ``tuning``, not ``--fresh``).
        Errors are not kept."""
        if path.is_file() and (tuning or not self.a.fresh):
            old = json.loads(path.read_text())
            if old.get("settings") == settings:
                return old["answer"]
        answer = measure()
        if "error" not in answer:
            path.write_text(json.dumps({"settings": settings, "answer": answer}))
        return answer

    def timed(self, model: onnx_models.ModelFile, who: str, cmd: list[str], env: dict,
              payload: dict, prefix: str = model_worker.RESULT) -> dict:
        """Contender ``who`` timing ``model`` in a fresh process: its answer, with its
        output's largest error relative to onnxruntime's (``err``)."""
        folder = model.path.parent
        out = folder / f"y-{who}.npy"
        payload = {**payload, "model": str(model.path), "input_name": model.input_name,
                   "input": str(onnx_models.input_file(model)), "output": str(out),
                   "threads": self.threads, "repeat": self.a.repeat}
        settings = {k: v for k, v in payload.items() if k not in ("output",)}

        def measure() -> dict:
            self.log(f"  {model.name}: timing {who} ...")
            return across_processes([peers.run_answering([*cmd, json.dumps(payload)], env,
                                                          prefix)
                                     for _ in range(self.a.processes)])
        answer = self.cached(folder / f"{who}.json", {**settings, "processes":
                                                      self.a.processes}, measure)
        ref = folder / "y-ort.npy"
        if "error" not in answer and out.is_file() and ref.is_file() and who != "ort":
            y, r = np.load(out), np.load(ref)
            answer["err"] = float(np.abs(y.reshape(r.shape) - r).max()
                                  / max(float(np.abs(r).max()), 1e-30)) \
                if y.size == r.size else float("nan")
        return answer

    # -- contenders -------------------------------------------------------------------------

    def ort(self, m: onnx_models.ModelFile) -> dict:
        return self.timed(m, "ort", [sys.executable, "-m", "bench.model_worker", "ort"],
                          peers.numpy_env(self.threads), {})

    def tvmlite(self, m: onnx_models.ModelFile, log: Path | None,
                precision: str = "fp32") -> dict:
        who = ("tuned" if log else "untuned") if precision == "fp32" else precision
        return self.timed(m, who, [sys.executable, "-m", "bench.model_worker", "tvmlite"],
                          peers.kernel_env(self.threads),
                          {"log": str(log) if log else None, "log_size": _size(log),
                           **({"precision": precision} if precision != "fp32" else {})})

    def openvino(self, m: onnx_models.ModelFile, precision: str) -> dict:
        who = "openvino" if precision == "f32" else "openvino-default"
        return self.timed(m, who, [self.a.openvino_python, "-m", "bench.model_worker",
                                   "openvino"], peers.numpy_env(self.threads),
                          {"precision": precision})

    def torch(self, m: onnx_models.ModelFile, mode: str) -> dict:
        if not m.from_torch:
            return {"error": m.note or "the ONNX file is not torch's export (no --torch-python)"}
        return self.timed(m, f"torch-{mode}", [self.a.torch_python, "-m", "bench.torch_models",
                                               "time"], peers.numpy_env(self.threads),
                          {"mode": mode, "quick": self.a.quick, "torch_model": m.name})

    def tune(self, m: onnx_models.ModelFile, trials: int) -> tuple[Path, dict]:
        """Run (or continue: ``--resume``) ``tvmlite tune`` on the model up to ``trials``;
        the log, and {"seconds": tuning wall time over all sessions, "search_s",
        "measure_s", "done"} (a session that dies keeps the log; the next one resumes)."""
        folder = m.path.parent
        log, state_path = folder / f"tvmlite-{trials}.jsonl", folder / f"tune-{trials}.json"
        state = json.loads(state_path.read_text()) if state_path.is_file() else \
            {"seconds": 0.0, "search_s": 0.0, "measure_s": 0.0, "sessions": 0, "done": False}
        if state["done"]:
            return log, state
        cmd = [sys.executable, "-m", "tvmlite", "tune", str(m.path), "--trials", str(trials),
               "--log", str(log), *(["--resume"] if log.is_file() else [])]
        self.log(f"  {m.name}: {' '.join(cmd[1:])}")
        t0 = time.perf_counter()
        try:
            proc = subprocess.run(cmd, stdout=subprocess.PIPE, text=True,   # progress: stderr
                                  timeout=TUNE_TIMEOUT, cwd=results.ROOT, check=False)
        finally:
            state["seconds"] += time.perf_counter() - t0
            state["sessions"] += 1
            state_path.write_text(json.dumps(state))
        found = re.search(r"([\d.]+)s searching \+ ([\d.]+)s measuring", proc.stdout)
        if found:
            state["search_s"] += float(found[1])
            state["measure_s"] += float(found[2])
        if proc.returncode != 0:
            tail = proc.stdout.strip().splitlines()[-3:]
            return log, {**state, "error": " | ".join(tail) or f"exit {proc.returncode}"}
        state["done"] = True
        state_path.write_text(json.dumps(state))
        self.log("\n".join(f"    {ln}" for ln in proc.stdout.splitlines()[:4]))
        return log, state

    def tvm(self, m: onnx_models.ModelFile, trials: int) -> dict:
        """MetaSchedule on the model with ``trials`` in all (its tasks at most
        ``--trials-per-task`` each), then its library timed in a fresh process."""
        work = m.path.parent / f"tvm-{trials}"
        payload = {"onnx": str(m.path), "input_name": m.input_name, "shape": list(m.shape),
                   "trials": trials, "per_task": self.a.trials_per_task,
                   "threads": self.threads, "mcpu": self.a.tvm_mcpu, "work_dir": str(work)}
        env = dict(peers.numpy_env(self.threads), TVM_NUM_THREADS=str(self.threads))
        cmd = [self.a.tvm_python, str(peers.HERE / "tvm_peer.py")]

        def tune() -> dict:
            self.log(f"  {m.name}: MetaSchedule, {trials} trials ...")
            return peers.run_tvm_peer("tune-model", payload, self.threads,
                                      self.a.tvm_python, timeout=TUNE_TIMEOUT)
        tuned = self.cached(m.path.parent / f"tvm-{trials}-tune.json", payload, tune,
                            tuning=True)
        if "error" in tuned:
            return tuned
        answer = self.timed(m, "tvm", [*cmd, "time-model"], env, {"so": tuned["so"]},
                            prefix=peers.TVM_RESULT)
        return {**answer, **{k: tuned[k] for k in ("tuning_seconds", "trials", "target")}}

    # -- one model --------------------------------------------------------------------------

    def model(self, name: str) -> dict:
        a = self.a
        folder = self.cache / name
        m = onnx_models.model_file(name, a.quick, folder, a.torch_python if "torch" in a.peers
                                   else None)
        self.log(f"{name}: {m.path} ({m.source}), input {m.input_name} {list(m.shape)}")
        row: dict[str, Any] = {"model": name, "source": m.source, "notes": [m.note] if m.note
                               else []}
        row["tasks"] = self.cached(folder / "tasks.json", {"model": str(m.path)},
                                   lambda: count_tasks(m.path), tuning=True)["tasks"]
        row["ort"] = self.ort(m) if "ort" in a.peers else {"error": "not in --peers"}
        row["untuned"] = self.tvmlite(m, None)
        row["bf16"] = self.tvmlite(m, None, "bf16")
        trials = a.trials_per_task * row["tasks"]
        if a.tuned:
            log, state = self.tune(m, trials)
            row["tune"] = {**state, "trials": trials}
            row["tuned"] = self.tvmlite(m, log) if "error" not in state else \
                {"error": state["error"]}
        for precision in ("f32", "default"):
            key = "openvino" if precision == "f32" else "openvino-default"
            row[key] = self.openvino(m, precision) if "openvino" in a.peers else \
                {"error": "not in --peers"}
        for mode in ("eager", "compile"):
            key = f"torch-{mode}"
            row[key] = {"error": "not a torch model"} if name not in onnx_models.TORCH else \
                self.torch(m, mode) if "torch" in a.peers else {"error": "not in --peers"}
        row["tvm"] = {"error": "needs --tuned (same trials as ours)"} if not a.tuned else \
            self.tvm(m, trials) if "tvm" in a.peers else {"error": "not in --peers"}
        self.log(models_report.summary_line(row))
        return row


def count_tasks(path: Path) -> dict:
    """How many tasks ``tvmlite tune`` makes of the model (``search.extract_tasks``)."""
    from tvmlite.frontend import from_onnx
    from tvmlite.search.graph_tasks import extract_tasks
    from tvmlite.target.target import Target
    return {"tasks": len(extract_tasks(from_onnx(path), Target.host()))}


def _size(path: Path | None) -> int:
    return path.stat().st_size if path is not None and path.is_file() else 0


def parse(argv: list[str] | None) -> argparse.Namespace:
    p = bench_args.parser("models", __doc__, out=Path("bench/results"),
                          quick="smoke run: toy MobileNet-V2 and BERT encoder, 2 trials per "
                                "task, 3 repeats", torch_python=True, tvm_python=True)
    p.add_argument("--models", nargs="+", choices=onnx_models.MODELS, default=None)
    p.add_argument("--tuned", action="store_true",
                   help="also tune (tvmlite tune, and MetaSchedule with the same trials)")
    p.add_argument("--trials-per-task", type=int, default=64,
                   help="budget: this x the model's tasks (default 64, the goal's)")
    p.add_argument("--peers", nargs="*", choices=PEERS, default=None,
                   help="peers to compare (default all; --quick: all but tvm, whose "
                        "builders start slowly; absent ones are skipped)")
    p.add_argument("--openvino-python", default=peer_python("openvino"),
                   help="python with openvino installed (default $TVMLITE_OPENVINO_PYTHON, "
                        "else this one)")
    p.add_argument("--tvm-mcpu", default=None,
                   help="LLVM CPU name for TVM (default: peers.llvm_cpu() of this CPU)")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--repeat", type=int, default=25, help="timed samples (median)")
    p.add_argument("--processes", type=int, default=3,
                   help="fresh processes per contender (default 3): the figure is the "
                        "median of theirs, and the report gives their spread")
    p.add_argument("--cache", type=Path, default=None,
                   help="model files, logs and answers (default bench/out/models[-quick])")
    p.add_argument("--fresh", action="store_true", help="re-time every contender")
    p.add_argument("--cpu", default=None, help="CPU name in the results file's name "
                                               "(default: peers.cpu_slug())")
    p.add_argument("--doc", type=Path, default=None,
                   help="write this results JSON's tables into docs/benchmarks.md, then stop")
    a = p.parse_args(argv)
    if a.trials_per_task < 1 or a.threads < 1 or a.repeat < 1 or a.processes < 1:
        p.error("--trials-per-task, --threads, --repeat and --processes must be positive")
    if a.peers is None:
        a.peers = [p for p in PEERS if not (a.quick and p == "tvm")]
    if a.quick:
        a.trials_per_task, a.repeat = min(a.trials_per_task, 2), min(a.repeat, 3)
        a.processes = 1
    a.cache = a.cache or results.ROOT / "bench" / "out" / ("models-quick" if a.quick
                                                           else "models")
    a.tvm_mcpu = a.tvm_mcpu or peers.llvm_cpu()
    a.cpu = a.cpu or peers.cpu_slug()
    return a


def main(argv: list[str] | None = None) -> int:
    a = parse(argv)
    if a.doc:
        page = models_report.write_doc(a.doc, results.ROOT / "docs" / "benchmarks.md")
        print(f"wrote the models section of {page}")
        return 0
    run = Run(a)
    names = a.models or list(QUICK_MODELS if a.quick else DEFAULT_MODELS)
    rows = []
    for name in names:
        try:
            rows.append(run.model(name))
        except (OSError, ValueError, subprocess.SubprocessError) as err:
            run.log(f"{name}: failed: {type(err).__name__}: {err}")
            rows.append({"model": name, "notes": [f"failed: {err}"]})
    name = "models" + ("-quick" if a.quick else "") + f"-{a.cpu}"
    tables = models_report.tables(rows, a)
    md, _ = results.write(a.out / name, "Whole models against every peer", tables,
                          name="models", argv=argv if argv is not None else sys.argv[1:],
                          notes=models_report.run_notes(a),
                          header={"tvm_mcpu": a.tvm_mcpu, "cpu_name": a.cpu,
                                  "geomean": _geomeans(rows)})
    print(f"wrote {md}")
    return 0


def _geomeans(rows: list[dict]) -> dict[str, float | None]:
    return {peer: models_report.geomean([s for r in rows
                                         if (s := models_report.speedup(r, peer))])
            for peer in models_report.SPEEDUP_PEERS}


if __name__ == "__main__":
    raise SystemExit(main())

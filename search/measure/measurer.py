"""The loop that builds, runs and logs a batch of candidates.

Both searches measure through ``Measurer.measure``: it skips candidates the log already
holds (so a resumed tuning never pays for a candidate twice), builds the rest in parallel,
then times them one by one in the isolated runner while nothing else of ours runs, and
appends one record per candidate to the log as soon as it is measured.
"""
from __future__ import annotations

from typing import Any, Sequence

from tvmlite.search.measure.inputs import MeasureInput, MeasureResult


class Measurer:
    """Builds, runs and logs batches of candidates for one tuning run.

    ``log_file`` may already hold records (from an interrupted run, or another search on
    the same workload): a candidate whose state key is in it is not measured again, its
    logged result is returned instead. New results are appended to the log one record at
    a time, as soon as each is measured.
    """

    def __init__(self, log_file: Any = None, builder: Any = None, runner: Any = None,
                 target: Any = None, tuner: str = "", seed: int | None = None):
        from tvmlite.target.target import Target
        from tvmlite.search.measure.builder import LocalBuilder
        from tvmlite.search.measure.runner import LocalRunner
        self.target = target or Target.host()
        self.builder = builder or LocalBuilder(self.target)
        self.runner = runner or LocalRunner()
        check = getattr(self.runner, "check_target", None)   # a Runner has it
        if check is not None:
            check(self.target)   # a runner that cannot run this target says so now
        self.tuner, self.seed = tuner, seed
        self.log_file = log_file
        self.known: dict[str, Any] = {}     # state key -> Record (this target's, from the log)
        self.records: list = []             # records measured by this Measurer
        if log_file is not None:
            from tvmlite.search.records.record import load_records, target_matches
            for rec in load_records(log_file, missing_ok=True):
                if target_matches(rec.target, self.target):
                    self.known.setdefault(rec.key, rec)

    def measure(self, inputs: Sequence[MeasureInput]) -> list[MeasureResult]:
        """Results in input order. Duplicates within the batch are measured once."""
        from tvmlite.search.records.record import append_record, make_record
        results: dict[str, MeasureResult] = {}
        todo: list[MeasureInput] = []
        for inp in inputs:
            k = inp.key
            if k in self.known:
                results[k] = self.known[k].result
            elif k not in results and all(t.key != k for t in todo):
                todo.append(inp)
        if todo:
            builds = self.builder.build(todo)   # all compiles happen before any timing
            measured = self.runner.run(todo, builds, reference=self.builder.build_reference)
            for inp, res in zip(todo, measured):
                rec = make_record(inp, res, self.target, tuner=self.tuner, seed=self.seed)
                if self.log_file is not None:
                    append_record(self.log_file, rec)
                self.known[inp.key] = rec
                self.records.append(rec)
                results[inp.key] = res
        return [results[inp.key] for inp in inputs]

    def close(self) -> None:
        self.runner.close()

    def __enter__(self) -> "Measurer":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

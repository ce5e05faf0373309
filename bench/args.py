"""The flags the benchmarks share, declared once, so ``--trials`` or ``--torch-python``
means the same in every one of them (``python -m bench NAME --help`` shows each's)."""
from __future__ import annotations

import argparse
from pathlib import Path

from bench import peers


def parser(name: str, doc: str | None, *, trials: int | None = None,
           seeds: int | list[int] | None = None, out: Path | None = None,
           quick: str | None = None, torch_python: bool = False,
           tvm_python: bool = False) -> argparse.ArgumentParser:
    """An argument parser for benchmark ``name`` (its prog is ``python -m bench name``;
    its description the first line of ``doc``) with the common flags it asks for: each
    keyword given adds its flag with that default (``quick`` is the flag's help, saying
    what a smoke run of this benchmark does)."""
    p = argparse.ArgumentParser(prog=f"python -m bench {name}",
                                description=(doc or name).strip().splitlines()[0])
    if trials is not None:
        p.add_argument("--trials", type=int, default=trials,
                       help=f"measurements per tuning (default {trials})")
    if isinstance(seeds, list):
        p.add_argument("--seeds", type=int, nargs="+", default=seeds,
                       help=f"search seeds, one run each (default {' '.join(map(str, seeds))})")
    elif seeds is not None:
        p.add_argument("--seeds", type=int, default=seeds,
                       help=f"how many seeds (runs), 0, 1, ... (default {seeds})")
    if out is not None:
        p.add_argument("--out", type=Path, default=out,
                       help=f"logs and results go here (default {out})")
    if quick is not None:
        p.add_argument("--quick", action="store_true", help=quick)
    if torch_python:
        p.add_argument("--torch-python", default=peers.torch_python(),
                       help="python with torch installed (default $TVMLITE_TORCH_PYTHON, "
                            "else this one)")
    if tvm_python:
        p.add_argument("--tvm-python", default=peers.tvm_python(),
                       help="python with apache-tvm installed (default $TVMLITE_TVM_PYTHON, "
                            "else this one)")
    return p

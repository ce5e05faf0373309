"""Template-free search (sketches + evolution + XGBoost cost model) on GMM 1024 and a
ResNet 3x3 conv, against numpy / PyTorch measured in the same run (see bench/tuning.py).

``--baseline-seeds K`` runs the same search guided by a random model, to show what the
XGBoost model buys at an equal number of trials.

    python -m bench tune-template-free [--ops gmm conv] [--trials 1000] [--seeds 1]
        [--baseline-seeds 3] [--population 2048] [--out bench/out/template_free]
"""
from __future__ import annotations

from bench import tuning


def main(argv: list[str] | None = None) -> int:
    return tuning.main(argv, ("xgb", "random"), __doc__, "template_free", "tune-template-free")


if __name__ == "__main__":
    raise SystemExit(main())

"""Templated search (the schedules/ templates tuned by XGBTuner) on GMM 1024 and a ResNet
3x3 conv, against numpy / PyTorch measured in the same run (see bench/tuning.py).

``--baseline-seeds K`` runs RandomTuner on the same templates, to show what the model
buys at an equal number of trials.

    python -m bench tune-templated [--ops gmm conv] [--trials 1000] [--seeds 1]
        [--baseline-seeds 3] [--out bench/out/templated]
"""
from __future__ import annotations

from bench import tuning


def main(argv: list[str] | None = None) -> int:
    return tuning.main(argv, ("xgb-templated", "random-templated"), __doc__, "templated",
                       "tune-templated")


if __name__ == "__main__":
    raise SystemExit(main())

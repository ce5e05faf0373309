"""Templated search (the schedules/ templates tuned by XGBTuner) on GMM 1024 and a ResNet
3x3 conv, against numpy / PyTorch measured in the same run (see bench/tuning.py).

``--baseline-seeds K`` runs RandomTuner on the same templates, to show what the model
buys at an equal number of trials.

    python bench/tune_templated.py [--ops gmm conv] [--trials 1000] [--seeds 1]
        [--baseline-seeds 3] [--out bench/out/templated]
"""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import tuning  # noqa: E402

if __name__ == "__main__":
    raise SystemExit(tuning.main(None, ("xgb-templated", "random-templated"),
                                 __doc__.splitlines()[0], "templated"))

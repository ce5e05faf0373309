"""Template-free search (sketches + evolution + XGBoost cost model) on GMM 1024 and a
ResNet 3x3 conv, against numpy / PyTorch measured in the same run (see bench/tuning.py).

``--baseline-seeds K`` runs the same search guided by a random model, to show what the
XGBoost model buys at an equal number of trials.

    python bench/tune_template_free.py [--ops gmm conv] [--trials 1000] [--seeds 1]
        [--baseline-seeds 3] [--population 2048] [--out bench/out/template_free]
"""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import tuning  # noqa: E402

if __name__ == "__main__":
    raise SystemExit(tuning.main(None, ("xgb", "random"), __doc__.splitlines()[0],
                                 "template_free"))

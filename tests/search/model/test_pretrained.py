"""The shipped pretrained cost models: trained from logs by the script, plain .npz files
in the package, loaded by default at the start of both searches, off with
``TuningOptions(pretrained=False)``."""
from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pytest
import tomllib

from tvmlite.search.model.cost_model import XGBModel
from tvmlite.search.model.features import FEATURE_NAMES
from tvmlite.search.model.pretrained import (
    FILES,
    PretrainedWarning,
    cpu_label,
    load_pretrained,
    main,
    training_rows,
)
from tvmlite.search.options import TuningOptions
from tvmlite.search.template_free.task import SearchTask

DATA = Path(__file__).parent / "data" / "conv2d_nhwc_random.jsonl.gz"
ROOT = Path(__file__).resolve().parents[3]


def test_the_script_trains_both_models_from_a_gzipped_log(tmp_path, capsys):
    assert main([str(DATA), "--out", str(tmp_path), "--max-programs", "64"]) == 0
    assert "trained on 64 programs" in capsys.readouterr().out
    packsum = load_pretrained("pack-sum", path=tmp_path / "pretrained.npz")
    rank = load_pretrained("itervar", path=tmp_path / "pretrained_itervar.npz")
    assert packsum.trained and packsum.loss == "pack-sum" and packsum.num_programs == 64
    assert rank.trained and rank.loss == "rank" and rank.n_features == 2 * len(FEATURE_NAMES)
    with np.load(tmp_path / "pretrained.npz", allow_pickle=False) as f:   # never a pickle
        assert all(f[k].dtype != object for k in f.files)


def test_groups_are_per_workload_and_cpu_and_a_cpu_can_be_left_out():
    xs, ys, groups = training_rows([DATA], max_programs=32)
    assert len(xs) == len(ys) == len(groups) == 32 and all(y > 0 for y in ys)
    assert all("@x86_64/512b/2c/" in g for g in groups)
    assert training_rows([DATA], exclude_cpu="x86_64/512b") == ([], [], [])
    with pytest.raises(ValueError, match="at least 16"):
        main([str(DATA), "--exclude-cpu", "x86_64", "--out", "/nonexistent"])


def test_the_package_ships_the_models_and_declares_them():
    for kind, path in FILES.items():
        assert path.is_file(), f"{path} is missing: run python -m tvmlite.search.model.pretrained"
        with warnings.catch_warnings():
            warnings.simplefilter("error", PretrainedWarning)
            assert load_pretrained(kind).trained
    data = tomllib.loads((ROOT / "pyproject.toml").read_text())
    shipped = data["tool"]["setuptools"]["package-data"]["tvmlite.search.model"]
    assert sorted(shipped) == sorted(p.name for p in FILES.values())


def test_a_bad_file_warns_and_starts_cold(tmp_path):
    bad = tmp_path / "x.npz"
    bad.write_bytes(b"not a zip")
    with pytest.warns(PretrainedWarning, match="starting cold"):
        assert load_pretrained("pack-sum", path=bad) is None
    with pytest.raises(ValueError, match="kind"):
        load_pretrained("knob")


def test_both_searches_start_from_it_by_default_and_cold_when_asked():
    from tvmlite.search import templated
    from tvmlite.search.templated.xgb_tuner import XGBTuner
    task = SearchTask(func="matmul", args=(32, 32, 32, "float32"))
    assert task.policy(TuningOptions()).model.trained
    assert not task.policy(TuningOptions(pretrained=False)).model.trained
    tt = templated.create("matmul", (32, 32, 32, "float32"))
    tuner = XGBTuner(tt)
    tuner._prepare(TuningOptions())
    assert tuner.model.trained and tuner.model.loss == "rank"
    cold = XGBTuner(tt)
    cold._prepare(TuningOptions(pretrained=False))
    assert not cold.model.trained
    knob = XGBTuner(tt, feature_type="knob")
    knob._prepare(TuningOptions())
    assert not knob.model.trained           # knob rows do not transfer: no shipped model
    with pytest.raises(ValueError, match="pretrained must be True or False"):
        TuningOptions(pretrained="yes")


def test_cpu_label_tells_cpus_apart():
    from tvmlite.target.target import Target
    host = Target.host()
    assert cpu_label(host).startswith(f"{host.arch}/{host.vector_bits}b/{host.cores}c/")
    assert isinstance(XGBModel, type)


def test_a_prior_is_dropped_once_the_task_has_its_own_programs():
    rng = np.random.default_rng(0)
    xs = [rng.random((2, 6), dtype=np.float32) for _ in range(40)]
    ys = list(rng.random(40) + 0.1)
    m = XGBModel(seed=0, n_threads=1, num_boost_round=5)
    m.update(xs[:24], ys[:24], ["other"] * 24)
    assert m.as_prior(until=15) is m and m.trained
    m.update(xs[24:34], ys[24:34], ["mine"] * 10)
    assert m.num_programs == 34 and m.trained          # the prior still ranks
    m.update(xs[34:], ys[34:], ["mine"] * 6)
    assert m.num_programs == 16                         # 16 own programs, prior dropped
    m.update(xs[:4], ys[:4], ["mine"] * 4)
    assert m.num_programs == 20
    with pytest.raises(ValueError, match="until"):
        m.as_prior(until=0)

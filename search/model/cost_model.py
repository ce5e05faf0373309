"""The cost model: which candidate programs will run fastest, guessed from their features,
so the searches measure only the most promising ones.

A program's features are a float32 array with one row per store statement (shape
``(n_stores, F)``, ``n_stores >= 1``, ``F`` fixed by the extractor). The XGBoost model
scores each row and adds the rows up per program ("pack-sum"), so programs with different
numbers of stores share one model.

Map of this module:
- ``CostModel``: the interface the searches use (``update`` with measurements,
  ``predict`` scores, higher = faster).
- ``RandomModel``: seeded uniform scores; the baseline and the cold start.
- ``XGBModel``: gradient-boosted trees, retrained from scratch on every update;
  ``save``/``load`` (one ``.npz`` file, read without pickle) and ``pretrain``.
- ``pairwise_accuracy``: the share of program pairs a model orders correctly.
- Losses (``LOSSES``): ``"pack-sum"`` (default), ``"pack-sum-throughput"``, ``"rank"``;
  see ``_pack_sum_targets`` for why the default sums times rather than throughputs.
"""
from __future__ import annotations

import abc
import json
import os
import zipfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from tvmlite.errors import TvmliteError

if TYPE_CHECKING:  # xgboost is imported where it is used: importing it takes ~0.3 s
    import xgboost as xgb

__all__ = ["CostModel", "RandomModel", "XGBModel", "CostModelFileError", "LOSSES",
           "MIN_TRAINING_PROGRAMS", "pairwise_accuracy"]

LOSSES = ("pack-sum", "pack-sum-throughput", "rank")
MIN_TRAINING_PROGRAMS = 16   # programs with a nonzero throughput before the trees are trusted
FAILED_THROUGHPUT = 1e-3     # normalized throughput a failed program counts as (1000x slower)
THROUGHPUT_WEIGHT_FLOOR = 0.1  # "pack-sum-throughput": weight of failed and very slow programs
FILE_FORMAT = "tvmlite.search.XGBModel"
FILE_VERSION = 1

# Tree settings: deep enough for interactions between a store's loop and buffer features,
# small enough that 2000 programs retrain in about a second on two cores.
_TREE_PARAMS = {"max_depth": 6, "eta": 0.2, "gamma": 0.0, "min_child_weight": 0.0,
                "max_bin": 64, "tree_method": "hist", "verbosity": 0}


class CostModelFileError(TvmliteError, ValueError):
    """A saved cost-model file is missing, damaged, or from another format or version."""


@dataclass(frozen=True)
class Packed:
    """All programs' store rows concatenated once, and where each program starts."""
    rows: np.ndarray     # (total stores, F) float32
    starts: np.ndarray   # (n programs,) index of each program's first row
    counts: np.ndarray   # (n programs,) rows per program

    @property
    def program_of_row(self) -> np.ndarray:
        return np.repeat(np.arange(len(self.counts)), self.counts)

    def sums(self, values: np.ndarray) -> np.ndarray:
        """Per-program sums of per-row values (rows or row predictions)."""
        return np.add.reduceat(values, self.starts, axis=0)


def pack(xs: Sequence[np.ndarray], n_features: int | None) -> Packed:
    """Check the per-program feature arrays and concatenate them (the one copy per call)."""
    if isinstance(xs, np.ndarray) and xs.ndim != 3:
        raise TypeError(f"xs must be a sequence of (n_stores, F) arrays, one per program; "
                        f"got one array of shape {xs.shape}")
    counts = np.empty(len(xs), dtype=np.int64)
    width = n_features
    for i, x in enumerate(xs):
        shape = getattr(x, "shape", None)
        if shape is None or len(shape) != 2:
            raise TypeError(f"xs[{i}] must be a 2-D (n_stores, F) feature array, "
                            f"got {type(x).__name__} of shape {shape}")
        if shape[0] == 0:
            raise ValueError(f"xs[{i}] has no store rows; every program has at least one "
                             f"store, so leave out programs without features")
        width = shape[1] if width is None else width
        if shape[1] != width:
            raise ValueError(f"xs[{i}] has {shape[1]} features per store, expected {width} "
                             f"(the feature count this model was trained with)")
        counts[i] = shape[0]
    rows = (np.concatenate(xs, axis=0, dtype=np.float32) if len(xs)
            else np.empty((0, width or 0), dtype=np.float32))
    starts = np.cumsum(counts) - counts
    return Packed(rows, starts, counts)


def check_labels(xs: Sequence[np.ndarray], ys: Sequence[float],
                 groups: Sequence[str] | None) -> tuple[np.ndarray, list[str]]:
    """The throughputs as floats and the groups as strings, checked against ``xs``."""
    y = np.asarray(ys, dtype=np.float64)
    if y.shape != (len(xs),):
        raise ValueError(f"ys must hold one throughput per program ({len(xs)}), "
                         f"got shape {y.shape}")
    if not np.all(np.isfinite(y)) or np.any(y < 0):
        raise ValueError("ys must be finite and >= 0 (1/seconds or GFLOP/s; 0 for a "
                         "failed program), got " + str(y[~(np.isfinite(y) & (y >= 0))][:3]))
    if groups is None:
        return y, [""] * len(y)
    g = list(groups)
    if len(g) != len(y):
        raise ValueError(f"groups must name one task per program ({len(y)}), got {len(g)}")
    for i, name in enumerate(g):
        if not isinstance(name, str):
            raise TypeError(f"groups[{i}] must be a str (the task's workload key), "
                            f"got {type(name).__name__}")
    return y, g


def pairwise_accuracy(pred: Sequence[float], y: Sequence[float]) -> float:
    """Share of program pairs with different ``y`` that ``pred`` orders the same way (a tie
    in ``pred`` counts half): 0.5 is chance, 1.0 a perfect ranking. Memory stays bounded
    by comparing one block of programs against all at a time."""
    p, t = np.asarray(pred, dtype=np.float64), np.asarray(y, dtype=np.float64)
    if p.ndim != 1 or p.shape != t.shape:
        raise ValueError(f"pred and y must be 1-D and of equal length, got shapes "
                         f"{p.shape} and {t.shape}")
    agree = pairs = 0.0
    for lo in range(0, len(t), 1024):
        dy = np.sign(t[lo:lo + 1024, None] - t[None, :])
        dp = np.sign(p[lo:lo + 1024, None] - p[None, :])
        mask = dy != 0
        pairs += np.count_nonzero(mask)
        agree += np.count_nonzero(mask & (dy == dp)) + 0.5 * np.count_nonzero(mask & (dp == 0))
    if pairs == 0:
        raise ValueError("y needs at least two different values for a pairwise accuracy")
    return agree / pairs


class CostModel(abc.ABC):
    """What the searches ask of a cost model: learn from measurements, score candidates."""

    @abc.abstractmethod
    def update(self, xs: Sequence[np.ndarray], ys: Sequence[float],
               groups: Sequence[str] | None = None) -> None:
        """Learn from measured programs: ``xs`` their feature arrays, ``ys`` throughputs
        (0 for a failed program), ``groups`` the task of each (None: all one task)."""

    @abc.abstractmethod
    def predict(self, xs: Sequence[np.ndarray]) -> np.ndarray:
        """One score per program; only the order matters (higher = faster)."""


class RandomModel(CostModel):
    """Uniform random scores from a seeded generator: what a search does with no model."""

    def __init__(self, seed: int = 0) -> None:
        self._rng = np.random.default_rng(seed)

    def update(self, xs: Sequence[np.ndarray], ys: Sequence[float],
               groups: Sequence[str] | None = None) -> None:
        check_labels(xs, ys, groups)

    def predict(self, xs: Sequence[np.ndarray]) -> np.ndarray:
        return self._rng.random(len(xs))


def normalized_throughputs(y: np.ndarray, groups: list[str],
                           best: dict[str, float]) -> np.ndarray:
    """Each throughput over the best ever measured in its task, so the best program of
    every task has label 1 and tasks of very different speeds train one model."""
    tops = np.array([best[g] for g in groups], dtype=np.float64)
    return np.divide(y, tops, out=np.zeros_like(y), where=tops > 0)


def _pack_sum_targets(labels: np.ndarray, loss: str) -> tuple[np.ndarray, np.ndarray]:
    """Per-program target of the summed row predictions, and its weight.

    "pack-sum" sums *times*: the target is the normalized time 1/label (best program = 1)
    and the weight label**2 makes the squared error a relative one. Stores run one after
    the other, so a program's time really is the sum of its stores' times; a model that
    sums throughputs instead cannot tell that more stores mean a slower program (on
    synthetic programs of 1-4 stores it ranked worse than chance). The relative error
    still lets better programs count more in absolute time, like Ansor's label weights.
    "pack-sum-throughput" is Ansor's form: target = label, weight = label (floored so
    failed programs still teach the model something).
    Failed programs count as FAILED_THROUGHPUT; weights are scaled to mean 1 so the trees'
    L2 regularization means the same whatever the data.
    """
    if loss == "pack-sum":
        y = np.maximum(labels, FAILED_THROUGHPUT)
        target, weight = 1.0 / y, y * y
    else:
        target, weight = labels, np.maximum(labels, THROUGHPUT_WEIGHT_FLOOR)
    return target, weight / weight.mean()


def _pack_sum_objective(packed: Packed, target: np.ndarray, weight: np.ndarray):
    """XGBoost objective: squared error of each program's summed row predictions. Every
    row of a program gets the program's gradient (d sum / d row = 1) and its weight as
    hessian."""
    program_of_row = packed.program_of_row
    row_hess = weight[program_of_row]

    def objective(preds: np.ndarray, _dtrain) -> tuple[np.ndarray, np.ndarray]:
        sums = packed.sums(preds.astype(np.float64))
        return (weight * (sums - target))[program_of_row], row_hess
    return objective


def _sort_by_group(groups: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """Order and query ids that put each task's programs together, as ranking needs."""
    names = {g: i for i, g in enumerate(dict.fromkeys(groups))}
    qid = np.array([names[g] for g in groups], dtype=np.int64)
    order = np.argsort(qid, kind="stable")
    return order, qid[order]


class XGBModel(CostModel):
    """XGBoost on per-store features, retrained from scratch on every update.

    It keeps the most recent ``max_training`` measured programs; until
    MIN_TRAINING_PROGRAMS of them ran (nonzero throughput) it predicts seeded random
    scores and ``trained`` is False. Deterministic for a given seed and thread count.

    It trains on one thread unless told otherwise: a few thousand programs fit quickly
    on one core, while XGBoost's OpenMP threads on cores that are busy (another job, a
    compile) wait on each other at every tree: on a busy 2-core machine an update took
    many times longer on two threads than on one.
    """

    def __init__(self, seed: int = 0, n_threads: int | None = None,
                 num_boost_round: int = 100, max_training: int = 4096,
                 loss: str = "pack-sum") -> None:
        for name, value, low in (("seed", seed, 0), ("num_boost_round", num_boost_round, 1),
                                 ("max_training", max_training, MIN_TRAINING_PROGRAMS)):
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)) \
                    or value < low:
                raise ValueError(f"{name} must be an int >= {low}, got {value!r}")
        if n_threads is not None and (not isinstance(n_threads, int) or n_threads < 1):
            raise ValueError(f"n_threads must be None (one) or an int >= 1, "
                             f"got {n_threads!r}")
        if loss not in LOSSES:
            raise ValueError(f"loss must be one of {', '.join(LOSSES)}; got {loss!r}")
        self.seed, self.loss = int(seed), loss
        self.num_boost_round, self.max_training = int(num_boost_round), int(max_training)
        self.n_threads = n_threads or 1
        self.n_features: int | None = None
        self._rng = np.random.default_rng(seed)
        self._xs: list[np.ndarray] = []
        self._ys: list[float] = []
        self._groups: list[str] = []
        self._best: dict[str, float] = {}
        self._booster: xgb.Booster | None = None
        # programs learnt before the search (a pretrained model): the oldest ``_n_prior``
        # entries, dropped once the task's own programs reach ``prior_until``
        self._n_prior = 0
        self.prior_until: int | None = None

    @property
    def trained(self) -> bool:
        """Whether predictions come from the trees (else from the seeded random fallback)."""
        return self._booster is not None

    @property
    def num_programs(self) -> int:
        """How many measured programs the model currently trains on."""
        return len(self._ys)

    @property
    def task_programs(self) -> dict[str, int]:
        """How many of the programs it trains on each task (group) gave: one task's,
        or several for a model that alike tasks share (the task scheduler's families)."""
        counts: dict[str, int] = {}
        for g in self._groups:
            counts[g] = counts.get(g, 0) + 1
        return counts

    def update(self, xs: Sequence[np.ndarray], ys: Sequence[float],
               groups: Sequence[str] | None = None) -> None:
        packed = pack(xs, self.n_features)
        y, g = check_labels(xs, ys, groups)
        if not len(y):
            return
        self.n_features = packed.rows.shape[1]
        for name, value in zip(g, y, strict=True):
            self._best[name] = max(self._best.get(name, 0.0), float(value))
        self._xs.extend(np.split(packed.rows, packed.starts[1:]))
        self._ys.extend(y.tolist())
        self._groups.extend(g)
        drop = max(0, len(self._ys) - self.max_training)
        if self._n_prior and self.prior_until is not None and \
                len(self._ys) - self._n_prior >= self.prior_until:
            drop = max(drop, self._n_prior)   # enough own programs: the prior is done
        self._n_prior = max(0, self._n_prior - drop)
        del self._xs[:drop], self._ys[:drop], self._groups[:drop]
        self._retrain()

    def as_prior(self, until: int) -> XGBModel:
        """Treat everything learnt so far as a prior (a pretrained model's programs): the
        trees rank candidates from the start, and once ``until`` programs of the search
        itself are in, the prior's programs are dropped and the model is the task's own.
        Returns self."""
        if isinstance(until, bool) or not isinstance(until, int) or until < 1:
            raise ValueError(f"as_prior(until=...) must be an int >= 1, got {until!r}")
        self._n_prior, self.prior_until = len(self._ys), until
        return self

    def add_column(self, column: Callable[[np.ndarray], np.ndarray]) -> None:
        """Extend the rows of every program kept (a prior's) by ``column(rows)``, one value
        per row, and retrain: for a search whose features have that column too."""
        self._xs = [np.hstack([x, column(x)[:, None]]).astype(np.float32) for x in self._xs]
        self.n_features = self._xs[0].shape[1] if self._xs else None
        self._retrain()

    def pretrain(self, xs: Sequence[np.ndarray], ys: Sequence[float],
                 groups: Sequence[str] | None = None) -> None:
        """Learn from existing logs before a search starts (transfer): same as update."""
        self.update(xs, ys, groups)

    def predict(self, xs: Sequence[np.ndarray]) -> np.ndarray:
        """One score per program, higher = faster. With "pack-sum" a score is minus the
        predicted time relative to the best program measured in its task (-1: as fast)."""
        booster = self._booster
        if booster is None:   # not trained
            return self._rng.random(len(xs))
        packed = pack(xs, self.n_features)
        if not len(xs):
            return np.empty(0)
        if self.loss == "rank":
            return booster.inplace_predict(packed.sums(packed.rows),
                                           predict_type="margin").astype(np.float64)
        rows = booster.inplace_predict(packed.rows, predict_type="margin")
        sums = packed.sums(rows.astype(np.float64))
        return -sums if self.loss == "pack-sum" else sums

    def _params(self, **extra) -> dict:
        return {**_TREE_PARAMS, "nthread": self.n_threads, "seed": self.seed, **extra}

    def _retrain(self) -> None:
        """Fit new trees on everything kept, or fall back to random until enough ran."""
        import xgboost as xgb  # here, not at the top: importing it takes ~0.3 s
        y = np.asarray(self._ys)
        if np.count_nonzero(y) < MIN_TRAINING_PROGRAMS:
            self._booster = None
            return
        packed = pack(self._xs, self.n_features)
        labels = normalized_throughputs(y, self._groups, self._best)
        if self.loss == "rank":
            order, qid = _sort_by_group(self._groups)
            data = xgb.DMatrix(packed.sums(packed.rows)[order], label=labels[order], qid=qid,
                               nthread=self.n_threads)
            self._booster = xgb.train(self._params(objective="rank:pairwise"), data,
                                      num_boost_round=self.num_boost_round)
            return
        target, weight = _pack_sum_targets(labels, self.loss)
        data = xgb.DMatrix(packed.rows, nthread=self.n_threads)
        self._booster = xgb.train(self._params(base_score=0.0, disable_default_eval_metric=1),
                                  data, num_boost_round=self.num_boost_round,
                                  obj=_pack_sum_objective(packed, target, weight))

    def save(self, path: str | os.PathLike) -> None:
        """Write the trees, the training programs and the per-task best throughputs (the
        normalization) to one ``.npz`` file, so a loaded model keeps learning from the
        same data. Nothing in it is pickled."""
        meta = {"format": FILE_FORMAT, "version": FILE_VERSION, "loss": self.loss,
                "seed": self.seed, "num_boost_round": self.num_boost_round,
                "max_training": self.max_training, "n_features": self.n_features,
                "best": self._best}
        booster = (np.frombuffer(bytes(self._booster.save_raw(raw_format="ubj")), np.uint8)
                   if self._booster is not None else np.zeros(0, np.uint8))
        packed = pack(self._xs, self.n_features)
        with open(path, "wb") as f:
            np.savez_compressed(f, meta=np.frombuffer(json.dumps(meta).encode(), np.uint8),
                                booster=booster, rows=packed.rows, counts=packed.counts,
                                ys=np.asarray(self._ys, np.float64),
                                groups=np.asarray(self._groups, dtype=np.str_))

    @classmethod
    def load(cls, path: str | os.PathLike, n_threads: int | None = None) -> XGBModel:
        """Read a file written by ``save``; CostModelFileError names what is wrong."""
        import xgboost as xgb

        def bad(why: str) -> CostModelFileError:
            return CostModelFileError(f"{os.fspath(path)}: not a usable tvmlite cost-model "
                                      f"file ({why}); write it with XGBModel.save(), or "
                                      f"delete it to start from an untrained model")
        try:
            with open(path, "rb") as f, np.load(f, allow_pickle=False) as data:
                arrays = {k: data[k] for k in ("meta", "booster", "rows", "counts", "ys",
                                               "groups")}
            meta = json.loads(arrays["meta"].tobytes().decode())
        except FileNotFoundError:
            raise bad("no such file") from None
        except (OSError, ValueError, KeyError, zipfile.BadZipFile, EOFError) as err:
            raise bad(f"{type(err).__name__}: {str(err)[:120]}") from None
        if not isinstance(meta, dict) or meta.get("format") != FILE_FORMAT:
            raise bad(f"format is not {FILE_FORMAT!r}")
        if meta.get("version") != FILE_VERSION:
            raise bad(f"version {meta.get('version')!r}, this tvmlite reads {FILE_VERSION}")
        try:
            model = cls(seed=meta["seed"], n_threads=n_threads, loss=meta["loss"],
                        num_boost_round=meta["num_boost_round"],
                        max_training=meta["max_training"])
        except (KeyError, ValueError, TypeError) as err:
            raise bad(f"bad settings: {err}") from None
        try:
            model._restore_training(arrays, meta.get("n_features"), meta.get("best"))
        except (ValueError, TypeError) as err:
            raise bad(f"training data: {err}") from None
        if arrays["booster"].size:
            try:
                model._booster = xgb.Booster(params=model._params(),
                                             model_file=bytearray(arrays["booster"].tobytes()))
            except xgb.core.XGBoostError as err:
                raise bad(f"booster does not load: {str(err).splitlines()[0][:120]}") from None
            if model._booster.num_features() != model.n_features:
                raise bad(f"booster expects {model._booster.num_features()} features, "
                          f"file says {model.n_features}")
        return model

    def _restore_training(self, arrays: dict, width, best) -> None:
        """Put saved training programs back; ValueError if they are not self-consistent."""
        rows, counts, ys = arrays["rows"], arrays["counts"], arrays["ys"]
        groups = [str(g) for g in arrays["groups"]]
        if (rows.ndim != 2 or counts.ndim != 1 or counts.dtype.kind not in "iu"
                or counts.sum() != len(rows) or np.any(counts < 1)
                or ys.shape != counts.shape or len(groups) != len(counts)
                or (width is None) != (len(counts) == 0)
                or (width is not None and rows.shape[1] != width)):
            raise ValueError("arrays disagree in shape")
        y, _ = check_labels(counts, ys, groups)
        self._best = {str(k): float(v) for k, v in dict(best or {}).items()}
        if not set(groups) <= set(self._best):
            raise ValueError("a task has no best throughput")
        self.n_features = width
        self._xs = np.split(rows.astype(np.float32), np.cumsum(counts)[:-1])[:len(counts)]
        self._ys, self._groups = y.tolist(), groups

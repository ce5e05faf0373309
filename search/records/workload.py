"""Workloads: a compute definition plus the plain arguments that made it, stored as data.

A tuning log must rebuild its kernel even when the script that defined the compute is
gone, so the te DAG itself is serialized to JSON (never pickled) and its sha256 is the
workload key. Logs come from elsewhere, so reading validates every field before a te
object is built, and re-uses the te constructors' own checks for what they cover.

The JSON form itself (writer and validating reader) is ``compute_json.py``; this module
is the Workload: its label, arguments, key, flop count and the checks of what it holds.
"""
from __future__ import annotations

import hashlib
import inspect
import json
import math
from dataclasses import dataclass
from functools import cached_property
from typing import Any, Sequence

from tvmlite import te
from tvmlite.ir.expr import ARITH_OPS, BinOp, Call, Expr, Reduce, Select, TensorRead, children
from tvmlite.ir.symbolic import SizeVar, bind_extent
from tvmlite.ops import OPS
from tvmlite.schedule.schedule import Schedule
from tvmlite.schedule.state import uniquify_names
from tvmlite.search.records.compute_json import (
    HEX64,
    MAX_ARGS,
    MAX_NDIM,
    MAX_OPS,
    MAX_STR,
    WorkloadError,
    canonical,
    check_keys,
    compute_json,
    errors_at,
    read_compute,
    short_repr,
)
from tvmlite.te.bind import bind_sizes, free_sizes

__all__ = ["Workload", "WorkloadError", "workload_key"]


@dataclass(frozen=True, eq=False)
class Workload:
    """A compute (``tensors``: placeholders first, outputs last), a label and the plain
    arguments that made it. Equality and hashing go by ``key``, the sha256 of the compute
    alone: the same kernel tuned under two labels shares its records."""
    name: str
    args: dict
    tensors: tuple
    key: str
    sizes: Any = None   # a dynamic workload measured at these sizes ({"M": 64}); see at()

    def __post_init__(self) -> None:
        with errors_at("Workload"):
            te.check_name(self.name, "Workload.name")
        object.__setattr__(self, "args", _check_args(self.args))
        object.__setattr__(self, "tensors", tuple(self.tensors))
        if self.sizes is not None:
            object.__setattr__(self, "sizes", _check_sizes(self.sizes, self.size_names))
        if not isinstance(self.key, str) or not HEX64.match(self.key):
            raise WorkloadError(f"Workload.key must be 64 lowercase hex digits (a sha256), "
                                f"got {short_repr(self.key)}; build workloads with from_op, "
                                "from_tensors or from_json")

    # -- constructors ------------------------------------------------------------------
    @classmethod
    def from_op(cls, op_name: str, *args: Any, **kwargs: Any) -> "Workload":
        """The operator ``tvmlite.ops.OPS[op_name]`` at these arguments (bound by name,
        defaults filled in, so ``args`` records every choice)."""
        fn = OPS.get(op_name) if isinstance(op_name, str) else None
        if fn is None:
            raise WorkloadError(f"from_op: unknown operator {short_repr(op_name)}; known: "
                                f"{', '.join(OPS)}")
        sig = inspect.signature(fn)
        try:
            bound = sig.bind(*args, **kwargs)
        except TypeError as err:
            raise WorkloadError(f"from_op({op_name}): {err}; the signature is "
                                f"{op_name}{sig}") from None
        bound.apply_defaults()
        named = dict(bound.arguments)
        try:
            tensors = fn(**named)
        except (ValueError, TypeError) as err:
            raise WorkloadError(f"from_op({op_name}): {err}") from None
        return cls.from_tensors(tensors, op_name, named)

    @classmethod
    def from_tensors(cls, tensors: Sequence[te.Tensor], name: str = "custom",
                     args: dict | None = None) -> "Workload":
        """A workload of any te compute; ``tensors`` is the kernel's argument list.

        Names repeated in the DAG are made unique first, exactly as ``Schedule.create``
        would, so the key does not change when a schedule is made later."""
        tensors = _check_tensors(tensors)
        outputs = [t for t in tensors if isinstance(t.op, te.ComputeOp)]
        uniquify_names(te.collect_ops(outputs))
        text = canonical(compute_json(tensors))
        return cls(name, {} if args is None else args, tensors,
                   hashlib.sha256(text.encode()).hexdigest())

    @classmethod
    def from_json(cls, d: Any) -> "Workload":
        """Validate and rebuild a workload from ``to_json`` output (untrusted input)."""
        if not isinstance(d, dict):
            raise WorkloadError(f"workload must be a JSON object, got {type(d).__name__}")
        sizes = d.get("sizes") if isinstance(d, dict) else None
        if isinstance(d, dict) and "sizes" in d:  # a dynamic workload at one size
            d = {k: v for k, v in d.items() if k != "sizes"}
        check_keys(d, ("name", "args", "key", "compute"), "workload")
        with errors_at("workload"):
            te.check_name(d["name"], "name")
        if not isinstance(d["key"], str) or not HEX64.match(d["key"]):
            raise WorkloadError(f"workload: key must be 64 lowercase hex digits, "
                                f"got {short_repr(d['key'])}")
        wl = cls.from_tensors(read_compute(d["compute"]), d["name"], d["args"])
        if sizes is not None:
            if not isinstance(sizes, dict):
                raise WorkloadError(f"workload: sizes must be an object of name: int, got "
                                    f"{short_repr(sizes)}")
            wl = wl.at(sizes)
        if wl.key != d["key"]:
            raise WorkloadError(f"workload {d['name']}: key mismatch: the record says "
                                f"{d['key'][:16]}..., its compute hashes to {wl.key[:16]}... "
                                "(the compute was edited, or is not in canonical form)")
        return wl

    # -- views -------------------------------------------------------------------------
    @property
    def outputs(self) -> tuple:
        return tuple(t for t in self.tensors if isinstance(t.op, te.ComputeOp))

    @cached_property
    def flops(self) -> int:
        """Arithmetic operations of one run: per compute stage, output points times
        reduction points times the value arithmetic of one point (index arithmetic and
        conditions excluded, a reduction's combine included). At least 1."""
        total = 0
        for op in te.collect_ops(self.outputs):
            if isinstance(op, te.ComputeOp):
                if self.sizes is not None or self.size_names:
                    points = math.prod(self._at(d) for d in op.shape) * \
                        math.prod(self._at(iv.extent) for iv in op.reduce_axis)
                    total += points * _arith_count(op.body)
                    continue
                points = math.prod(op.shape) * math.prod(iv.extent for iv in op.reduce_axis)
                total += points * _arith_count(op.body)
        return max(1, total)

    # -- symbolic sizes ------------------------------------------------------------------
    @cached_property
    def size_names(self) -> tuple:
        """The symbolic sizes (te.var) of the compute, in first-seen order; () if static."""
        return tuple(free_sizes(self.tensors))

    @property
    def is_dynamic(self) -> bool:
        return bool(self.size_names)

    @cached_property
    def base_key(self) -> str:
        """The key of the compute alone (for a workload at sizes, that of the symbolic one)."""
        if self.sizes is None:
            return self.key
        return hashlib.sha256(self._compute_text.encode()).hexdigest()

    def at(self, sizes: dict) -> "Workload":
        """This dynamic workload measured at ``sizes``: the same symbolic compute (so the
        same deployed kernel), a key of its own per size, flops counted at that size."""
        if not self.is_dynamic:
            raise WorkloadError(f"workload {self.name} has no symbolic sizes to bind")
        sizes = _check_sizes(sizes, self.size_names)
        text = json.dumps([self.base_key, sorted(sizes.items())], separators=(",", ":"))
        return Workload(self.name, self.args, self.tensors,
                        hashlib.sha256(text.encode()).hexdigest(), sizes)

    def bound(self) -> "Workload":
        """The static workload of this one at its sizes (the compute with numbers for the
        sizes): what cost-model features and per-size references read."""
        if self.sizes is None:
            return self
        return Workload.from_tensors(bind_sizes(self.tensors, self.sizes), self.name,
                                     {**self.args, **self.sizes})

    def _at(self, extent: Any) -> int:
        try:
            return bind_extent(extent, self.sizes or {})
        except ValueError:
            raise WorkloadError(f"workload {self.name} is dynamic ({', '.join(self.size_names)}): "
                                f"count its flops at sizes, workload.at({{...}}).flops") from None

    def schedule(self) -> Schedule:
        return Schedule.create(self.outputs)

    @cached_property
    def _compute_text(self) -> str:
        return canonical(compute_json(self.tensors))

    def to_json(self) -> dict:
        args = {k: list(v) if isinstance(v, tuple) else v for k, v in self.args.items()}
        out = {"name": self.name, "args": args, "key": self.key,
               "compute": json.loads(self._compute_text)}
        if self.sizes is not None:
            out["sizes"] = dict(self.sizes)
        return out

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Workload) and other.key == self.key

    def __hash__(self) -> int:
        return hash(self.key)

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.args.items())
        at = "" if self.sizes is None else \
            " at " + ", ".join(f"{k}={v}" for k, v in self.sizes.items())
        return f"Workload({self.name}({args}){at}, key={self.key[:8]})"


def workload_key(tensors: Sequence[te.Tensor]) -> str:
    """The key of a compute: sha256 of its canonical JSON (labels and arguments aside)."""
    return Workload.from_tensors(tensors).key


def _scalar_ok(v: Any) -> bool:
    if v is None or isinstance(v, bool):
        return True
    if isinstance(v, int):
        return -2**63 <= v < 2**63
    if isinstance(v, float):
        return math.isfinite(v)
    return isinstance(v, str) and len(v) <= MAX_STR


def _check_args(args: Any) -> dict:
    """The named plain arguments: scalars, or flat short tuples of scalars (a kernel
    size ``(3, 3)``); lists become tuples."""
    if not isinstance(args, dict) or len(args) > MAX_ARGS:
        raise WorkloadError(f"workload args must be a dict of at most {MAX_ARGS} named "
                            f"plain values, got {short_repr(args)}")
    out = {}
    for k, v in args.items():
        if isinstance(v, SizeVar):   # a symbolic size argument is recorded by its name
            v = f"te.var({v.name})"
        if not isinstance(k, str) or not te.IDENT.match(k):
            raise WorkloadError(f"workload args: name {short_repr(k)} is not an identifier")
        if isinstance(v, (list, tuple)) and len(v) <= MAX_NDIM and all(map(_scalar_ok, v)):
            v = tuple(v)
        elif not _scalar_ok(v):
            raise WorkloadError(f"workload args: {k}={short_repr(v)} is not a plain value "
                                "(int, finite float, str, bool, None, or a short tuple of them)")
        out[k] = v
    return out


def _check_sizes(sizes: Any, names: tuple) -> dict:
    """A value for every symbolic size of the compute (ints >= 1), in its order."""
    if not isinstance(sizes, dict) or set(sizes) != set(names):
        raise WorkloadError(f"workload sizes must give exactly the sizes {list(names)} of "
                            f"the compute, got {short_repr(sizes)}")
    for k, v in sizes.items():
        if isinstance(v, bool) or not isinstance(v, int) or not 1 <= v <= te.MAX_ELEMENTS:
            raise WorkloadError(f"workload sizes: {k}={short_repr(v)} must be an int in "
                                f"[1, {te.MAX_ELEMENTS}]")
    return {n: int(sizes[n]) for n in names}


def _check_tensors(tensors: Any) -> tuple:
    if not isinstance(tensors, (list, tuple)) or not tensors:
        raise WorkloadError(f"tensors must be a non-empty list of te.Tensor (the kernel's "
                            f"arguments), got {short_repr(tensors)}")
    for t in tensors:
        if not isinstance(t, te.Tensor):
            raise WorkloadError(f"tensors: {short_repr(t)} is not a te.Tensor")
    if len({id(t.op) for t in tensors}) != len(tensors):
        raise WorkloadError("tensors: a tensor appears twice in the argument list")
    kinds = [isinstance(t.op, te.ComputeOp) for t in tensors]
    if not any(kinds) or kinds != sorted(kinds):
        raise WorkloadError(f"tensors must list the placeholders first, then the outputs "
                            f"(at least one compute), got {[t.name for t in tensors]}")
    ops = te.collect_ops([t for t in tensors if isinstance(t.op, te.ComputeOp)])
    if len(ops) > MAX_OPS:
        raise WorkloadError(f"the compute has {len(ops)} operations, more than {MAX_OPS}")
    given = {id(t.op) for t in tensors}
    for op in ops:
        if isinstance(op, te.PlaceholderOp) and id(op) not in given:
            raise WorkloadError(f"tensors: placeholder {op.name} is read by the outputs but "
                                "is not in the argument list; add it")
    used = {id(op) for op in ops}
    for t in tensors:
        if id(t.op) not in used:
            raise WorkloadError(f"tensors: placeholder {t.name} is not read by any output; "
                                "drop it from the argument list")
    return tuple(tensors)


def _arith_count(body: Expr) -> int:
    """Value arithmetic of one point: BinOp arithmetic, Call and Select count 1 each, a
    Reduce 1 (its combine); index expressions and conditions are not visited."""
    count, stack = 0, [body]
    while stack:
        e = stack.pop()
        if isinstance(e, TensorRead):
            continue
        if isinstance(e, Select):
            count += 1
            stack += [e.then, e.other]
        elif isinstance(e, Reduce):
            count += 1
            stack.append(e.source)
        else:
            if isinstance(e, Call) or (isinstance(e, BinOp) and e.op in ARITH_OPS):
                count += 1
            stack.extend(children(e))
    return count


# -- reading ------------------------------------------------------------------------------

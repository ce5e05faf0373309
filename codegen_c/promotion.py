"""Which local buffers a kernel keeps in vector variables (registers) rather than memory:
``promotable`` (the codegen declares such a buffer as vectors; ``tvmlite explain``
counts its traffic as free)."""
from __future__ import annotations

from tvmlite.ir.dtypes import (
    ITEMSIZE,
)
from tvmlite.ir.expr import (
    Const,
    Load,
    Ramp,
    walk,
)
from tvmlite.ir.stmt import (
    Allocate,
    IfThenElse,
    Store,
    TensorIntrinsic,
    walk_stmts,
)
from tvmlite.ir.symbolic import is_static, numel
from tvmlite.target.intrinsics import get_intrinsic

MAX_PROMOTED_BYTES = 2048


def promotable(s: Allocate) -> int:
    """Lanes L if every access to the buffer is a whole vector at a constant offset that is
    a multiple of L: then C keeps it in vector variables (registers), not in memory."""
    b = s.buffer
    if not is_static(numel(b.shape)) or b.size * ITEMSIZE[b.dtype] > MAX_PROMOTED_BYTES:
        return 0
    idx: list = []
    for st in walk_stmts(s.body):
        exprs = []
        if isinstance(st, TensorIntrinsic):
            if b.name in (st.a.name, st.b.name) or st.tile and st.out.name == b.name:
                return 0   # a tile block reads its accumulators from memory
            if st.out.name == b.name:
                idx.append(Ramp(st.out_index, 1, get_intrinsic(st.name).lanes))
        elif isinstance(st, Store):
            if st.buffer.name == b.name:
                idx.append(st.indices[0])
            exprs = [st.value] + list(st.indices)
        elif isinstance(st, IfThenElse):
            exprs = [st.cond]
        for e in exprs:
            idx.extend(x.indices[0] for x in walk(e)
                       if isinstance(x, Load) and x.buffer.name == b.name)
    if not idx or not all(isinstance(i, Ramp) and i.stride == 1 and isinstance(i.base, Const)
                          for i in idx):
        return 0
    lanes = {i.lanes for i in idx}
    if len(lanes) != 1:
        return 0
    L = lanes.pop()
    return L if b.size % L == 0 and all(i.base.value % L == 0 for i in idx) else 0

"""Where the vector erf's coefficients come from (``codegen_c/preamble.py``'s VERF).

erf(a) on [0, CLAMP] as a * P(a**2) / Q(a**2), P and Q of degree 5, Q(0) = 1: fitted by
linearized least squares (minimise a*P - erf*Q relative to erf, weighted by the previous
Q, Loeb's iteration), reweighted towards the largest errors (Lawson's) for a near-minimax
fit. The fit itself is near 2e-8 in float64; a float32 Horner evaluation's rounding
dominates, so the error is measured as the kernel computes it: float32 coefficients,
multiply-adds rounded once (the C compiler contracts ``p * s + c`` into an FMA), the
quotient capped at 1.

    python -m bench.erf_fit        # prints the coefficients and the float32 error in ulps
"""
import math

import numpy as np
from scipy.special import erf

DEGREE = 5
CLAMP = 4.1        # erf is 1.0f from 3.9 on; the clamp also maps inf to 1


def fit(degree: int = DEGREE, clamp: float = CLAMP, rounds: int = 30) -> tuple:
    """P's and Q's coefficients, lowest power first (Q's first is 1), in float64."""
    a = np.linspace(1e-4, clamp, 20000)
    f, s = erf(a), a * a
    weight, q_prev = np.ones_like(a), np.ones_like(a)
    rows = np.hstack([a[:, None] * s[:, None] ** np.arange(degree + 1),
                      -f[:, None] * s[:, None] ** np.arange(1, degree + 1)])
    for _ in range(rounds):
        w = weight / (f * q_prev)
        c, *_ = np.linalg.lstsq(rows * w[:, None], f * w, rcond=None)
        p, q = c[:degree + 1], np.r_[1.0, c[degree + 1:]]
        q_prev = np.polyval(q[::-1], s)
        err = np.abs(a * np.polyval(p[::-1], s) / q_prev - f) / f
        weight = weight * np.sqrt(err / err.max()) + 1e-12
        weight /= weight.max()
    return p, q


def as_float32_kernel(p: np.ndarray, q: np.ndarray, x: np.ndarray) -> np.ndarray:
    """erf(x) computed as the C helper computes it, in float32 with fused multiply-adds."""
    f32 = np.float32
    a = np.minimum(np.abs(x.astype(f32)), f32(CLAMP))
    s = (a * a).astype(f32)

    def horner(c: np.ndarray) -> np.ndarray:
        acc = np.full_like(s, f32(c[-1]))
        for ci in c[-2::-1]:     # one rounding per step: an FMA's
            acc = (acc.astype(np.float64) * s + np.float64(f32(ci))).astype(f32)
        return acc

    r = np.minimum((a * horner(p)).astype(f32) / horner(q), f32(1))
    return np.copysign(r, x)


def main() -> int:
    p, q = fit()
    rng = np.random.default_rng(0)
    x = np.r_[rng.uniform(-6, 6, 200_000), np.linspace(0, 4.5, 200_000)].astype(np.float32)
    want = np.array([math.erf(v) for v in x.astype(np.float64)])
    rel = np.abs(as_float32_kernel(p, q, x) - want) / np.maximum(np.abs(want), 1e-38)
    print("P:", ", ".join(f"{np.float32(c)}" for c in p))
    print("Q:", ", ".join(f"{np.float32(c)}" for c in q))
    print(f"largest error: {rel.max() / 2.0 ** -23:.2f} float32 ulps (of 2**-23, relative) "
          f"at x = {x[rel.argmax()]:.6g}; mean {rel.mean() / 2.0 ** -23:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Why kernels compile with -O2: GCC 12.2 at -O3 miscompiles this plain C (a guarded
sum, the shape our imperfect splits produce). The kernel flags must give the right sum."""
from __future__ import annotations

import pathlib
import subprocess

from tvmlite import Target

SRC = pathlib.Path(__file__).with_name("gcc_o3_guarded_reduction.c")


def test_kernel_flags_compute_guarded_reduction_correctly(tmp_path):
    target = Target.host()
    flags = [f for f in target.cflags if f not in ("-shared", "-fPIC")]
    exe = tmp_path / "guarded"
    res = subprocess.run([target.compiler, *flags, str(SRC), "-o", str(exe), "-lm"],
                         capture_output=True, text=True)
    # the kernel flags must build a plain C program: a failure here is a flags bug, not a skip
    assert res.returncode == 0, f"the kernel flags cannot build the probe: {res.stderr[:400]}"
    out = subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout.split()
    assert float(out[0]) == float(out[1]), f"guarded reduction gave {out[0]}, expected {out[1]}"

"""The device an array lives on and a kernel runs on, under TVM's names (``tvm.cpu(0)``).

tvmlite runs kernels on this machine's CPU only, so there is one kind of device; it
exists so that code written for TVM (``dev = tvm.cpu(0)``, ``tvm.nd.array(a, dev)``,
``mod.time_evaluator(name, dev)``) runs unchanged, and so that a wrong device is a clear
error rather than silently ignored.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tvmlite.checks import check_int

__all__ = ["Device", "cpu", "check_device"]


@dataclass(frozen=True)
class Device:
    """A device: ``kind`` "cpu" and its index (TVM's ``device_type``/``device_id``; the
    index names no core: OpenMP spreads a kernel's parallel loops over all of them)."""
    kind: str = "cpu"
    index: int = 0

    def __post_init__(self) -> None:
        if self.kind != "cpu":
            raise ValueError(f"Device(kind={self.kind!r}): tvmlite runs on the CPU only; "
                             f"use tvmlite.cpu()")
        check_int(self.index, "Device(index=...)", 0)

    @property
    def device_type(self) -> int:
        """TVM's code for a CPU (kDLCPU)."""
        return 1

    @property
    def device_id(self) -> int:
        return self.index

    def sync(self) -> None:
        """Wait for the device: a CPU kernel has returned when its call returns."""

    def __repr__(self) -> str:
        return f"cpu({self.index})"


def cpu(index: int = 0) -> Device:
    """This machine's CPU (TVM's ``tvm.cpu(0)``)."""
    return Device("cpu", index)


def check_device(dev: Any, where: str) -> Device:
    """``dev`` (None: ``cpu(0)``) if it is a Device, else a TypeError naming ``where``."""
    if dev is None:
        return cpu(0)
    if not isinstance(dev, Device):
        raise TypeError(f"{where}: dev must be a tvmlite.cpu() device (or None), got "
                        f"{type(dev).__name__}")
    return dev

"""The memory-bandwidth bound of a decode step: weight bytes read per step over measured copy bandwidth.

At batch 1 a decode step reads every weight once and does little arithmetic per byte, so its floor
is ``weight_bytes / bandwidth``. Bandwidth is measured as a large tensor copy, counting the bytes
read and written (what a STREAM-style copy reports). KV-cache reads are left out: at a few hundred
tokens they are under 1% of the weights here.
"""
from __future__ import annotations

import statistics
import time
from dataclasses import asdict, dataclass
from typing import Sequence

import torch
from torch import nn

COPY_BYTES = 256 * 2**20  # larger than any CPU's last-level cache


def weight_bytes(model: nn.Module) -> int:
    """Bytes of the distinct parameter tensors (tied embeddings / LM head counted once)."""
    seen = {}
    for p in model.parameters():
        seen[(p.device, p.data_ptr())] = p.numel() * p.element_size()
    return sum(seen.values())


def copy_bandwidth(nbytes: int = COPY_BYTES, repeats: int = 10, device: str | torch.device = "cpu") -> float:
    """Bytes per second of a ``nbytes`` tensor copy, read + write counted (best of ``repeats``).

    Each copy is timed by wall clock and, on a CPU, by process CPU time, and the shorter counts:
    on a shared machine a copy that waited for a core is long in wall time only; with several
    threads busy, CPU time is the longer one.
    """
    src = torch.ones(nbytes // 4, dtype=torch.float32, device=device)  # [n]
    dst = torch.empty_like(src)
    best = float("inf")
    for _ in range(repeats):
        _sync(src.device)
        t0, c0 = time.perf_counter(), time.process_time()
        dst.copy_(src)
        _sync(src.device)
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
        best = min(best, wall if src.device.type == "cuda" else min(wall, cpu))
    return 2 * nbytes / best


def read_seconds(model: nn.Module, repeats: int = 9) -> float:
    """Median wall seconds to read every distinct weight tensor once (a max over its bits): the floor
    of a step for any kernel, where the copy bound assumes reads run at copy speed."""
    tensors = list({(p.device, p.data_ptr()): p.detach() for p in model.parameters()}.values())
    bits = [t.view(torch.int16) if t.element_size() == 2 else t for t in tensors]
    times = []
    for _ in range(repeats + 1):  # the first warms up
        _sync(tensors[0].device)
        t0 = time.perf_counter()
        for b in bits:
            b.max()
        _sync(tensors[0].device)
        times.append(time.perf_counter() - t0)
    return statistics.median(times[1:])


def step_seconds(lm, prefix: Sequence[int], repeats: int = 9) -> tuple[float, float]:
    """Median wall and process-CPU seconds of one one-token step of ``lm`` after ``prefix`` (the
    cache trimmed back each time). CPU time leaves out waiting for a core on a shared machine."""
    session = lm.session()
    session.forward(list(prefix))
    wall, cpu = [], []
    for i in range(repeats + 1):
        _sync(lm.device)
        t0, c0 = time.perf_counter(), time.process_time()
        session.forward([int(prefix[-1])])
        _sync(lm.device)
        if i:  # the first step warms up
            wall.append(time.perf_counter() - t0)
            cpu.append(time.process_time() - c0)
        session.retain(len(prefix))
    return statistics.median(wall), statistics.median(cpu)


@dataclass
class Roofline:
    weight_bytes: int  # read per target step
    bandwidth: float  # bytes/s, copy (read + write)
    step_s: float  # measured one-token target step, wall clock
    step_cpu_s: float  # the same step in process CPU time (all threads)

    @property
    def bound_s(self) -> float:
        return self.weight_bytes / self.bandwidth

    @property
    def step_over_bound(self) -> float:
        return self.step_s / self.bound_s

    @property
    def cpu_step_over_bound(self) -> float:
        return self.step_cpu_s / self.bound_s

    def as_dict(self) -> dict:
        return {**asdict(self), "bound_s": self.bound_s, "step_over_bound": self.step_over_bound,
                "cpu_step_over_bound": self.cpu_step_over_bound}

    def table(self) -> str:
        return (f"roofline: {self.weight_bytes / 1e6:.0f} MB of weights per target step, copy bandwidth "
                f"{self.bandwidth / 1e9:.1f} GB/s (read + write) -> bound {self.bound_s * 1e3:.1f} ms; measured step "
                f"{self.step_s * 1e3:.1f} ms = {self.step_over_bound:.2f}x the bound "
                f"(CPU time {self.step_cpu_s * 1e3:.1f} ms = {self.cpu_step_over_bound:.2f}x)")


def measure_roofline(target, prefix: Sequence[int], repeats: int = 9) -> Roofline:
    return Roofline(weight_bytes(target.model), copy_bandwidth(device=target.device),
                    *step_seconds(target, prefix, repeats))


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)

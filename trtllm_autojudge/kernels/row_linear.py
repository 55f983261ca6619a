"""float32 linear layers for CPU decoding steps: the row-invariant kernel of ``plugins/torch/row_linear.cpp``.

At one to a few rows (a decode step of the target or the draft), torch's float32 ``nn.Linear`` reads
its weights at about half the speed a plain streaming loop gets on a CPU. :class:`RowLinear` calls
the project's kernel for inputs of up to :data:`MAX_ROWS` rows and ``torch.nn.functional.linear``
(the reference) above, where torch's GEMM is as fast or faster (measured: docs/cpu.md). The kernel
reduces every output element in one fixed order, so a token's output does not depend on the other
rows of the call; it equals the reference up to float32 rounding, not bitwise, so greedy output can
differ from torch's at a near-tie (``--cpu-linear torch`` keeps torch's numbers).

The kernel is built on first use with torch's extension tools (a C++ compiler and ninja), for the
host CPU, into ``build/torch_ext`` (``$AUTOJUDGE_TORCH_EXT_DIR`` moves it): about a minute, once per
machine. bf16 models keep :mod:`.cpu_linear`'s packed oneDNN layout.
"""
from __future__ import annotations

import functools
import hashlib
import logging
import os
import platform
import sys
from pathlib import Path
from types import ModuleType

import torch
from torch import nn

from .cpu_linear import replace_linears

log = logging.getLogger(__name__)

MAX_ROWS = 8  # the kernel's rows per call at most; torch's GEMM above (docs/cpu.md)
CHOICES = ("auto", "rows", "torch")
SOURCE = Path(__file__).resolve().parents[2] / "plugins" / "torch" / "row_linear.cpp"


class RowLinearUnavailable(RuntimeError):
    """The kernel cannot be built or run here (the message says why)."""


def _host_tag() -> str:
    """A short hash of the CPU's identity: the kernel is built for the host CPU, one build per kind."""
    try:
        lines = Path("/proc/cpuinfo").read_text().splitlines()
        ident = "\n".join(sorted({line for line in lines if line.startswith(("flags", "model name"))}))
    except OSError:
        ident = platform.processor()
    return hashlib.sha1(f"{platform.machine()}\n{ident}".encode()).hexdigest()[:10]


@functools.lru_cache(maxsize=None)
def row_linear_extension() -> ModuleType:
    """The compiled kernel (``row_linear(x, weight, bias)``), built once per machine and loaded once
    per process. Raises :class:`RowLinearUnavailable` with the reason when it cannot be built."""
    from torch.utils.cpp_extension import is_ninja_available, load

    if not SOURCE.is_file():
        raise RowLinearUnavailable(f"{SOURCE} is missing: the kernel is built from a source checkout of the repository")
    if not is_ninja_available():
        raise RowLinearUnavailable("torch's extension builder needs ninja: pip install ninja")
    build_dir = Path(os.environ.get("AUTOJUDGE_TORCH_EXT_DIR", SOURCE.parents[2] / "build" / "torch_ext")) / "cpu"
    build_dir.mkdir(parents=True, exist_ok=True)
    flags = ["-O3", "-ffp-contract=fast"] + (["-march=native"] if platform.machine() in ("x86_64", "AMD64") else [])
    name = f"autojudge_row_linear_{_host_tag()}"
    if not (build_dir / f"{name}.so").is_file():
        print(f"building the float32 CPU linear kernel into {build_dir} (once per machine, about a minute) ...",
              file=sys.stderr, flush=True)
    try:
        return load(name=name, sources=[str(SOURCE)], extra_cflags=flags, build_directory=str(build_dir))
    except (OSError, RuntimeError, ImportError) as e:
        raise RowLinearUnavailable(f"building {SOURCE.name} failed ({str(e).strip().splitlines()[-1]})") from e


class RowLinear(nn.Module):
    """Inference-only float32 CPU ``nn.Linear``: the kernel up to :data:`MAX_ROWS` rows, torch above.

    ``weight`` / ``bias`` stay the original parameters (shared with ties, counted by ``parameters()``).
    """

    def __init__(self, linear: nn.Linear):
        super().__init__()
        if linear.weight.dtype != torch.float32 or linear.weight.device.type != "cpu":
            raise ValueError(f"RowLinear needs a float32 CPU weight, got {linear.weight.dtype} on {linear.weight.device}")
        self.kernel = row_linear_extension()
        self.in_features, self.out_features = linear.in_features, linear.out_features
        self.weight, self.bias = linear.weight, linear.bias  # [out, in], [out] or None

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # x [..., in] -> [..., out]
        if x.dtype != torch.float32 or self.weight.dtype != torch.float32 or x.device.type != "cpu":
            raise RuntimeError(f"RowLinear computes float32 on cpu, got {x.dtype} input and {self.weight.dtype} "
                               f"weight on {x.device}: cast or move the model before loading it (models/loading.load_pair)")
        if torch.is_grad_enabled() and (x.requires_grad or self.weight.requires_grad):
            raise RuntimeError("RowLinear is for inference: run under torch.no_grad() or train an unreplaced model")
        rows = x.reshape(-1, self.in_features)  # [N, in]
        if rows.shape[0] > MAX_ROWS:
            return nn.functional.linear(x, self.weight, self.bias)
        bias = None if self.bias is None else self.bias.detach()
        y = self.kernel.row_linear(rows, self.weight.detach(), bias)  # [N, out]
        return y.reshape(*x.shape[:-1], self.out_features)

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, bias={self.bias is not None}"


def use_row_linears(choice: str, *modules: nn.Module) -> int:
    """Replace every float32 CPU ``nn.Linear`` under ``modules`` by a :class:`RowLinear` in place, per
    ``--cpu-linear``: ``rows`` (an error if the kernel cannot be built), ``auto`` (rows where it can,
    else torch's with a warning) or ``torch`` (nothing replaced). Returns the number replaced."""
    if choice not in CHOICES:
        raise ValueError(f"unknown --cpu-linear {choice!r}: choose one of {', '.join(CHOICES)}")

    def wanted(linear: nn.Linear) -> bool:
        return linear.weight.dtype == torch.float32 and linear.weight.device.type == "cpu"

    if choice == "torch" or not any(wanted(m) for module in modules for m in module.modules() if type(m) is nn.Linear):
        return 0
    try:
        row_linear_extension()
    except RowLinearUnavailable as e:
        if choice == "rows":
            raise
        log.warning("float32 CPU linears stay torch's (slower decoding steps): %s", e)
        return 0
    return replace_linears(modules, wanted, RowLinear)

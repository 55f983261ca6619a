"""The compute dtype of the models: ``auto``, ``float32`` or ``bfloat16``.

``auto`` (the default everywhere) is bfloat16 where the hardware computes it natively (a CUDA device
with bf16 support, or a CPU with ``avx512_bf16`` or AMX-BF16) and float32 elsewhere. Batch-1
decoding is memory-bound, so bf16 halves the bytes read per step; on a CPU without native bf16,
torch emulates it and it is slower than float32 (asked for explicitly, it runs with a warning).

Artefacts made with a model (label files, judge files, adapters) record the dtype they were made
in (:func:`dtype_name`); :func:`..dtype_record.check_artifact_dtype` warns when one is used in another.
"""
from __future__ import annotations

import logging
from functools import lru_cache
from pathlib import Path

import torch

log = logging.getLogger(__name__)

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}
CHOICES = ("auto", *DTYPES)
CPU_BF16_FLAGS = ("avx512_bf16", "amx_bf16")


@lru_cache(maxsize=1)
def cpu_has_native_bf16() -> bool:
    """True when the CPU has bf16 arithmetic instructions (x86 avx512_bf16 or AMX-BF16)."""
    try:
        flags = set(Path("/proc/cpuinfo").read_text().split())
    except OSError:  # not Linux: ask torch (private, so guarded)
        probe = getattr(torch.cpu, "_is_avx512_bf16_supported", None)
        return bool(probe and probe())
    return any(f in flags for f in CPU_BF16_FLAGS)


def native_bf16(device: str | torch.device) -> bool:
    device = torch.device(device)
    if device.type == "cuda":
        return torch.cuda.is_available() and torch.cuda.is_bf16_supported()
    return device.type == "cpu" and cpu_has_native_bf16()


def resolve_dtype(name: str, device: str | torch.device = "cpu") -> torch.dtype:
    """The torch dtype for ``--dtype NAME`` on ``device`` (``auto``: bf16 where native, else fp32)."""
    if name == "auto":
        return torch.bfloat16 if native_bf16(device) else torch.float32
    if name not in DTYPES:
        raise ValueError(f"unknown dtype {name!r}: choose one of {', '.join(CHOICES)}")
    dtype = DTYPES[name]
    if dtype == torch.bfloat16 and not native_bf16(device):
        log.warning("bfloat16 on %s without native bf16 arithmetic: it runs emulated and slower than float32 "
                    "(use --dtype auto or float32)", device)
    return dtype


def dtype_name(dtype: torch.dtype) -> str:
    """``torch.bfloat16`` -> ``"bfloat16"`` (the name artefacts record)."""
    return str(dtype).removeprefix("torch.")


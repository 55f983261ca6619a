"""Paired bootstrap over questions: how far a tokens-per-forward ratio against lossless can be trusted.

One accepted mismatch can send a response down another path, with another number of cycles, so
on 100 questions two operating points a few percent apart are often within each other's noise
(docs/notebook/program-draft30-judges.md, "The default threshold calibrated by answers"). Every summary row carries the
interval beside its ratio.
"""
from __future__ import annotations

import numpy as np

BOOTSTRAP_ROUNDS = 2000


def ratio_interval(tokens: np.ndarray, cycles: np.ndarray, ref_tokens: np.ndarray, ref_cycles: np.ndarray,
                   rounds: int = BOOTSTRAP_ROUNDS, level: float = 0.95, seed: int = 0) -> tuple[float, float]:
    """Central ``level`` interval of (sum tokens / sum cycles) / (sum ref_tokens / sum ref_cycles).

    All four arrays are ``[Q]``, one entry per question, the same question at the same index. Each
    round resamples the questions with replacement and takes the SAME questions for both sides
    (paired), so what the two runs share, like a question's length, cancels.
    """
    arrays = [np.asarray(a, np.float64) for a in (tokens, cycles, ref_tokens, ref_cycles)]
    if len({a.shape for a in arrays}) != 1 or arrays[0].ndim != 1 or arrays[0].size == 0:
        raise ValueError(f"ratio_interval needs four equal-length, non-empty [Q] arrays, got shapes "
                         f"{[a.shape for a in arrays]}")
    idx = np.random.default_rng(seed).integers(0, arrays[0].size, size=(rounds, arrays[0].size))  # [R, Q]
    t, c, rt, rc = (a[idx].sum(axis=1) for a in arrays)  # [R] each
    lo, hi = np.quantile((t / c) / (rt / rc), [(1 - level) / 2, (1 + level) / 2])
    return float(lo), float(hi)

"""Bootstrap over questions: how far a tokens-per-forward ratio against lossless (paired), or a
judge's ranking of mismatches (an AUC), can be trusted.

One accepted mismatch can send a response down another path, with another number of cycles, so
on 100 questions two operating points a few percent apart are often within each other's noise
(docs/notebook/program-draft30-judges.md, "The default threshold calibrated by answers"). Every summary row carries the
interval beside its ratio.
"""
from __future__ import annotations

import numpy as np
from sklearn.metrics import roc_auc_score

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


def auc_interval(labels: list[np.ndarray], scores: list[np.ndarray], rounds: int = BOOTSTRAP_ROUNDS,
                 level: float = 0.95, seed: int = 0) -> tuple[float, float, float]:
    """ROC AUC of ``scores`` for ``labels`` (True: the positive class) pooled over questions, and the
    central ``level`` interval of a bootstrap that resamples whole questions, as the mismatches of one
    question share its prompt and its path. One entry per question, each ``[M_q]`` (may be empty).
    Rounds whose resample holds one class only are left out. Returns (auc, lo, hi)."""
    if len(labels) != len(scores) or any(len(y) != len(x) for y, x in zip(labels, scores)):
        raise ValueError("auc_interval needs one [M_q] label array and one score array per question, of equal lengths")
    y_all, x_all = np.concatenate([np.asarray(y, bool) for y in labels]), np.concatenate([np.asarray(x, float) for x in scores])
    if y_all.all() or not y_all.any():
        raise ValueError(f"an AUC needs both classes: the {y_all.size} labels are all {bool(y_all[0]) if y_all.size else None}")
    rng, aucs = np.random.default_rng(seed), []
    for _ in range(rounds):
        pick = rng.integers(0, len(labels), size=len(labels))  # [Q]
        y, x = np.concatenate([labels[q] for q in pick]).astype(bool), np.concatenate([scores[q] for q in pick])
        if y.any() and not y.all():
            aucs.append(roc_auc_score(y, x))
    lo, hi = np.quantile(aucs, [(1 - level) / 2, (1 + level) / 2])
    return float(roc_auc_score(y_all, x_all)), float(lo), float(hi)

"""A model of what the oracle can gain on a chain draft, from acceptance rates and the harmless share.

On a chain of K drafts, let ``alpha[d]`` be the share of cycles whose depth-d draft is the target's
greedy token among those whose drafts 1..d-1 were (the drafter's alpha per depth). A lossless cycle
then emits, in expectation, ``1 + sum_d prod_{j<=d} alpha[j]`` tokens (the accepted drafts and the
target's own token). The ORACLE also accepts every mismatch labelled harmless; if a share ``h`` of
the mismatches at every depth is, its acceptance rate per depth is ``alpha + (1 - alpha) * h``.

The model assumes what favours the oracle: a harmless share the same at every depth and along the
oracle's own trajectory, and a draft as good after an accepted mismatch as after a match. Checked
against exact oracle replays of the 8-layer draft (``experiments/oracle_model.py``), it
overstates them. So a goal above the model's oracle is beyond every judge that keeps answers.

Words: ``alphas`` is the [D] alpha per depth; a number of tokens is per cycle (per target forward).
"""
from __future__ import annotations

import numpy as np
from scipy.optimize import brentq


def chain_tokens(alphas) -> float:
    """Expected tokens per cycle of a chain whose alpha per depth is ``alphas`` ([D])."""
    return 1.0 + float(np.cumprod(np.asarray(alphas, np.float64)).sum())


def constant_alphas(tokens_per_cycle: float, k: int) -> np.ndarray:
    """[k]: the one alpha, at every depth, under which a chain of ``k`` emits ``tokens_per_cycle``."""
    if not 1.0 < tokens_per_cycle < k + 1:
        raise ValueError(f"a chain of {k} drafts emits between 1 and {k + 1} tokens per cycle, got {tokens_per_cycle}")
    alpha = brentq(lambda a: chain_tokens(np.full(k, a)) - tokens_per_cycle, 0.0, 1.0)
    return np.full(k, alpha)


def with_harmless(alphas, share: float) -> np.ndarray:
    """[D]: the oracle's acceptance rate per depth when a ``share`` of the mismatches is harmless."""
    if not 0.0 <= share <= 1.0:
        raise ValueError(f"the harmless share is a fraction in [0, 1], got {share}")
    alphas = np.asarray(alphas, np.float64)
    return alphas + (1.0 - alphas) * share


def oracle_ratio(alphas, share: float) -> float:
    """The oracle's tokens per cycle over lossless's."""
    return chain_tokens(with_harmless(alphas, share)) / chain_tokens(alphas)


def share_needed(alphas, ratio: float) -> float:
    """The harmless share at which the oracle reaches ``ratio`` lossless's tokens per cycle; a ratio
    above what accepting every draft gives (the ceiling) is refused."""
    ceiling = oracle_ratio(alphas, 1.0)
    if not 1.0 <= ratio <= ceiling:
        raise ValueError(f"a chain of {len(alphas)} gains between 1x and {ceiling:.3f}x (every draft accepted), "
                         f"asked {ratio}x")
    return float(brentq(lambda h: oracle_ratio(alphas, h) - ratio, 0.0, 1.0))

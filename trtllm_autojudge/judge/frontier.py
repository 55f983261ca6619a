"""Threshold sweep: the accepted-mismatches / harm frontier of a judge on validation data.

Vocabulary (the decoding rule, docs/judge.md): a mismatch is ACCEPTED when the judge's
probability of "important" is below the threshold, ``p < threshold``; otherwise it is rejected.
For each threshold the frontier row holds, on the validation mismatches:

- ``accept_rate``: accepted / all mismatches (what the judge buys: longer accepted runs);
- ``unimportant_accept_rate``: accepted unimportant / all unimportant;
- ``important_accept_rate``: accepted important / all important (the HARM: each one may change
  the task's answer); it equals ``1 - recall``;
- ``recall``: rejected important / all important (recall of the important class);
- ``precision``: important / rejected (1.0 when nothing is rejected);
- ``important_share_of_accepted``: important / accepted (0.0 when nothing is accepted).

Thresholds are taken at quantiles of the validation probabilities, so every row is a distinct
operating point. The default threshold rule: the LARGEST threshold whose validation
``important_accept_rate`` is at most ``max_important_accept``.
"""
from __future__ import annotations

import numpy as np

DEFAULT_MAX_IMPORTANT_ACCEPT = 0.01  # the default threshold's validation important-accept rate


def sweep_thresholds(
    probs: np.ndarray,  # [M] float: validation probability of "important"
    labels: np.ndarray,  # [M] 0/1: validation labels
    num_quantiles: int = 101,
) -> list[dict[str, float]]:
    """Frontier rows at ``num_quantiles`` evenly spaced quantiles of ``probs``, thresholds ascending.

    Equal thresholds (ties in ``probs``) give one row, the one at the lowest quantile. Every rate
    column is non-decreasing down the table except ``recall`` (non-increasing), ``precision``
    and ``important_share_of_accepted``.
    """
    probs, labels = np.asarray(probs, np.float64), np.asarray(labels).astype(bool)
    if probs.shape != labels.shape or probs.ndim != 1 or probs.size == 0:
        raise ValueError(f"probs and labels must be the same non-empty [M], got {probs.shape} and {labels.shape}")
    n_important = int(labels.sum())
    n_unimportant = labels.size - n_important
    if n_important == 0 or n_unimportant == 0:
        raise ValueError("the threshold sweep needs both important and unimportant validation mismatches")
    rows, seen = [], set()
    for q in np.linspace(0.0, 1.0, num_quantiles):
        t = float(np.quantile(probs, q))
        if t in seen:
            continue
        seen.add(t)
        accepted = probs < t
        acc_imp = int((accepted & labels).sum())
        acc_unimp = int((accepted & ~labels).sum())
        rejected_imp = n_important - acc_imp
        n_rejected = labels.size - acc_imp - acc_unimp
        rows.append({
            "threshold": t,
            "quantile": float(q),
            "accept_rate": (acc_imp + acc_unimp) / labels.size,
            "unimportant_accept_rate": acc_unimp / n_unimportant,
            "important_accept_rate": acc_imp / n_important,
            "recall": rejected_imp / n_important,
            "precision": rejected_imp / n_rejected if n_rejected else 1.0,
            "important_share_of_accepted": acc_imp / (acc_imp + acc_unimp) if acc_imp + acc_unimp else 0.0,
        })
    return rows


def choose_threshold(frontier: list[dict[str, float]], max_important_accept: float) -> dict[str, float]:
    """The row with the largest threshold whose ``important_accept_rate <= max_important_accept``.

    The lowest row always qualifies (at the smallest validation probability nothing is accepted),
    so a judge too weak for the target yields a threshold that accepts (almost) nothing.
    """
    if not 0.0 <= max_important_accept <= 1.0:
        raise ValueError(f"max_important_accept is a fraction in [0, 1], got {max_important_accept}")
    ok = [r for r in frontier if r["important_accept_rate"] <= max_important_accept]
    if not ok:
        raise ValueError("no frontier row meets the important-accept limit; the frontier must start at its "
                         "lowest validation probability")
    return max(ok, key=lambda r: r["threshold"])


_TABLE = (("threshold", "threshold", "{:>11.5g}"), ("accept_rate", "accepted", "{:>10.1%}"),
          ("unimportant_accept_rate", "unimp.acc", "{:>10.1%}"), ("important_accept_rate", "harm", "{:>10.2%}"),
          ("precision", "precision", "{:>10.3f}"), ("important_share_of_accepted", "imp.share", "{:>10.2%}"))


def format_frontier(frontier: list[dict[str, float]], chosen_threshold: float | None = None, every: int = 5) -> str:
    """A text table of every ``every``-th row, the last one and the chosen one (marked ``*``).

    Columns: threshold, accepted (``accept_rate``), unimp.acc (``unimportant_accept_rate``),
    harm (``important_accept_rate``), precision, imp.share (``important_share_of_accepted``).
    """
    lines = ["  " + "".join(f"{h:>{11 if i == 0 else 10}}" for i, (_, h, _) in enumerate(_TABLE))]
    for i, r in enumerate(frontier):
        chosen = chosen_threshold is not None and r["threshold"] == chosen_threshold
        if i % every == 0 or chosen or i == len(frontier) - 1:
            lines.append(("* " if chosen else "  ") + "".join(fmt.format(r[col]) for col, _, fmt in _TABLE))
    return "\n".join(lines)

"""Probe judges for research tools: fit as ``train`` fits, report the validation ROC-AUC and the left tail.

A certified threshold lives in the judge's left tail: the share of harmless mismatches it accepts
while accepting only a small share of the harmful ones. ``train`` reports ROC-AUC over the whole
range; the probes of ``build_scripts/token_class_probe.py`` (other judge inputs) and
``build_scripts/judge_label_sources.py`` (other training labels) report both.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import roc_auc_score
from sklearn.preprocessing import StandardScaler

TAIL = (0.005, 0.01, 0.02, 0.05)  # shares of the harmful mismatches accepted


def harmless_at(probs: np.ndarray, labels: np.ndarray, share: float) -> float:  # probs, labels: [M]
    """Share of the harmless rows accepted (prob below the cut) where at most ``share`` of the
    harmful ones are: the cut is the harmful rows' ``floor(share * n)``-th smallest probability."""
    harmful = np.sort(probs[labels == 1])
    cut = harmful[min(int(share * harmful.size), harmful.size - 1)]
    return float((probs[labels == 0] < cut).mean())


def fit_probe(X_train: np.ndarray, y_train: np.ndarray,  # [M_train, F], [M_train]
              X_val: np.ndarray, y_val: np.ndarray,  # [M_val, F], [M_val]
              cs: list[float]) -> dict:
    """StandardScaler + L2 logistic regression, C by validation ROC-AUC over ``cs`` (as ``train``):
    the chosen C, its ROC-AUC and the harmless share accepted at each share of :data:`TAIL`."""
    scaler = StandardScaler().fit(X_train)
    best = None
    for C in cs:
        model = LogisticRegression(C=C, max_iter=1000).fit(scaler.transform(X_train), y_train)
        probs = model.predict_proba(scaler.transform(X_val))[:, 1]  # [M_val]
        auc = float(roc_auc_score(y_val, probs))
        if best is None or auc > best["val_roc_auc"]:
            best = {"C": C, "val_roc_auc": auc, "probs": probs}
    probs = best.pop("probs")
    return {**best, "harmless_accepted_at": {str(s): harmless_at(probs, y_val, s) for s in TAIL}}


def tail_text(result: dict) -> str:
    """A :func:`fit_probe` result's left tail as printed: "0.7% / 2.3% / 5.3% / 16.0%"."""
    return " / ".join(f"{v:.1%}" for v in result["harmless_accepted_at"].values())


def write_result(path: Path | None, result: dict) -> None:
    """A probe's results as JSON at ``path`` (its folder made); nothing when ``path`` is None."""
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(result, indent=1))

"""Probe judges for research tools: fit as ``train`` fits, report the validation ROC-AUC and the left tail.

A certified threshold lives in the judge's left tail: the share of harmless mismatches it accepts
while accepting only a small share of the harmful ones. ``train`` reports ROC-AUC over the whole
range; the probes of ``experiments/token_class_probe.py`` (other judge inputs),
``experiments/judge_label_sources.py`` (other training labels) and
``experiments/judge_model_probe.py`` (other model families than the linear judge) report both.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from sklearn.decomposition import PCA
from sklearn.ensemble import HistGradientBoostingClassifier
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import roc_auc_score
from sklearn.neural_network import MLPClassifier
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

TAIL = (0.005, 0.01, 0.02, 0.05)  # shares of the harmful mismatches accepted


def harmless_at(probs: np.ndarray, labels: np.ndarray, share: float) -> float:  # probs, labels: [M]
    """Share of the harmless rows accepted (prob below the cut) where at most ``share`` of the
    harmful ones are: the cut is the harmful rows' ``floor(share * n)``-th smallest probability."""
    harmful = np.sort(probs[labels == 1])
    cut = harmful[min(int(share * harmful.size), harmful.size - 1)]
    return float((probs[labels == 0] < cut).mean())


def _best_of(candidates: dict, X_train: np.ndarray, y_train: np.ndarray, X_val: np.ndarray, y_val: np.ndarray,
             key: str) -> dict:
    """Fit each ``{value: estimator}`` candidate; keep the one with the best validation ROC-AUC:
    ``{key: value, "val_roc_auc", "harmless_accepted_at"}``."""
    best = None
    for value, estimator in candidates.items():
        probs = estimator.fit(X_train, y_train).predict_proba(X_val)[:, 1]  # [M_val]
        auc = float(roc_auc_score(y_val, probs))
        if best is None or auc > best["val_roc_auc"]:
            best = {key: value, "val_roc_auc": auc, "probs": probs}
    probs = best.pop("probs")
    return {**best, "harmless_accepted_at": {str(s): harmless_at(probs, y_val, s) for s in TAIL}}


def fit_probe(X_train: np.ndarray, y_train: np.ndarray,  # [M_train, F], [M_train]
              X_val: np.ndarray, y_val: np.ndarray,  # [M_val, F], [M_val]
              cs: list[float]) -> dict:
    """StandardScaler + L2 logistic regression, C by validation ROC-AUC over ``cs`` (as ``train``):
    the chosen C, its ROC-AUC and the harmless share accepted at each share of :data:`TAIL`."""
    candidates = {C: make_pipeline(StandardScaler(), LogisticRegression(C=C, max_iter=1000)) for C in cs}
    return _best_of(candidates, X_train, y_train, X_val, y_val, "C")


MODEL_FAMILIES = ("logistic", "mlp", "boosted-trees")


def fit_model_probe(family: str, X_train: np.ndarray, y_train: np.ndarray,  # [M_train, F], [M_train]
                    X_val: np.ndarray, y_val: np.ndarray,  # [M_val, F], [M_val]
                    cs: list[float], seed: int = 0) -> dict:
    """A probe judge of another model family than the shipped linear one, as :func:`fit_probe`
    reports it (its regularisation chosen by validation ROC-AUC):

    - ``logistic``: :func:`fit_probe` itself, the judge ``train`` fits;
    - ``mlp``: one hidden layer of 64 ReLU units over standardised inputs, L2 ``alpha`` from 1, 10,
      early stopping on a tenth of the training rows;
    - ``boosted-trees``: histogram gradient boosting over the inputs' 64 leading principal
      components (trees over thousands of raw hidden dimensions would mostly fit noise), depth
      limits from 3 and unlimited.
    """
    if family == "logistic":
        return fit_probe(X_train, y_train, X_val, y_val, cs)
    if family == "mlp":
        candidates = {a: make_pipeline(StandardScaler(), MLPClassifier((64,), alpha=a, max_iter=300, early_stopping=True,
                                                                       random_state=seed)) for a in (1.0, 10.0)}
        return _best_of(candidates, X_train, y_train, X_val, y_val, "alpha")
    if family == "boosted-trees":
        components = min(64, X_train.shape[1], X_train.shape[0])
        candidates = {d: make_pipeline(StandardScaler(), PCA(components, random_state=seed),
                                       HistGradientBoostingClassifier(max_iter=300, learning_rate=0.05, max_depth=d,
                                                                      random_state=seed)) for d in (3, None)}
        return _best_of(candidates, X_train, y_train, X_val, y_val, "max_depth")
    raise ValueError(f"unknown model family {family!r}: use one of {MODEL_FAMILIES}")


def mean_over_seeds(runs: dict[int, dict[str, dict]]) -> dict[str, dict]:
    """``{seed: {name: probe result}}`` -> ``{name: mean ROC-AUC and mean left tail over the seeds}``."""
    seeds = list(runs)
    return {name: {"val_roc_auc": float(np.mean([runs[s][name]["val_roc_auc"] for s in seeds])),
                   "harmless_accepted_at": {str(t): float(np.mean([runs[s][name]["harmless_accepted_at"][str(t)]
                                                                   for s in seeds])) for t in TAIL}}
            for name in runs[seeds[0]]}


def tail_text(result: dict) -> str:
    """A :func:`fit_probe` result's left tail as printed: "0.7% / 2.3% / 5.3% / 16.0%"."""
    return " / ".join(f"{v:.1%}" for v in result["harmless_accepted_at"].values())


def write_result(path: Path | None, result: dict) -> None:
    """A probe's results as JSON at ``path`` (its folder made); nothing when ``path`` is None."""
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(result, indent=1))


def over_seeds(runs: dict[int, dict[str, dict]]) -> dict:
    """A probe's fits over seeds as the scripts write them: ``{"per_seed": {seed: fits}, "mean": ...}``."""
    return {"per_seed": {str(seed): fits for seed, fits in runs.items()}, "mean": mean_over_seeds(runs)}


def seed_lines(prefix: str, result: dict, name_width: int) -> list[str]:
    """One printed line per fit of an :func:`over_seeds` result, each seed's then the means:
    ``prefix``, the fit's name, the seed, ROC-AUC and the left tail."""
    return [f"{prefix}{name:<{name_width}}{seed:>6}{r['val_roc_auc']:>9.3f}  {tail_text(r)}"
            for seed, fits in [*result["per_seed"].items(), ("mean", result["mean"])] for name, r in fits.items()]

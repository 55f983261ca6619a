"""Judge training: StandardScaler + L2 logistic regression, C chosen by validation ROC-AUC.

The procedure (docs/judge.md):
1. split the mismatches by PROMPT (never by token), ``val_fraction`` of the prompts to validation,
   seeded; or by TEMPLATE (``split_by="template"``): variants of one template share their wording
   and their program, so a prompt split puts near-copies on both sides and its validation ROC-AUC
   measures new instances of seen templates, where a template split measures unseen templates;
2. fit a StandardScaler on the training rows;
3. for each C of the grid (default: 10^-7 ... 10^-0.5 in half-decades, then 1, 3, 10, 50, 100), fit
   a logistic regression (L2, lbfgs, label 1 = important, no class weights) and score it by
   validation ROC-AUC; keep the best (ties: the smallest C, the strongest regularisation);
4. sweep the threshold over validation-probability quantiles (:mod:`.frontier`) and take the
   default threshold by the rule of :func:`.frontier.choose_threshold`.
The returned head is the one fitted on the training prompts only, so every reported metric
describes exactly the model that is saved; with ``refit_all`` (the research code's
``--train_on_all_data``) the scaler and the regression at the chosen C are fitted again on every row,
and the metrics, threshold included, stay those of the validation fit (``refit_all`` in the report).
"""
from __future__ import annotations

import warnings
from dataclasses import asdict, dataclass

import numpy as np
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import roc_auc_score
from sklearn.preprocessing import StandardScaler
from tqdm.auto import tqdm

from .dataset import FeatureSet
from .frontier import DEFAULT_MAX_IMPORTANT_ACCEPT, choose_threshold, format_frontier, sweep_thresholds
from .head import JudgeHead

DEFAULT_C_GRID = tuple(float(10 ** (-k / 2)) for k in range(14, 0, -1)) + (1.0, 3.0, 10.0, 50.0, 100.0)


SPLIT_UNITS = ("prompt", "template")


def split_by_group(
    group: np.ndarray,  # [M] int: the prompt (or template) of each row
    val_fraction: float = 0.1,
    seed: int = 0,
    unit: str = "prompt",
) -> tuple[np.ndarray, np.ndarray]:  # ([M] bool train, [M] bool validation)
    """Assign whole groups (prompts or templates, named by ``unit`` in errors) to train or
    validation: ``round(val_fraction * G)`` groups (at least one, and at least one left for
    training) go to validation, drawn with ``seed``."""
    if not 0.0 < val_fraction < 1.0:
        raise ValueError(f"val_fraction must lie in (0, 1), got {val_fraction}")
    groups = np.unique(group)
    if groups.size < 2:
        raise ValueError(f"the split is by {unit} and needs at least 2 {unit}s, the feature set has {groups.size}: "
                         f"mine more {unit}s")
    n_val = min(max(1, round(val_fraction * groups.size)), groups.size - 1)
    val_groups = np.random.default_rng(seed).permutation(groups)[:n_val]
    val = np.isin(group, val_groups)
    return ~val, val


def split_groups(fs: FeatureSet, split_by: str) -> np.ndarray:  # [M] int
    """The split unit of every row: its prompt, or its prompt's template."""
    if split_by == "prompt":
        return fs.prompt_index
    if split_by != "template":
        raise ValueError(f"split_by must be one of {SPLIT_UNITS}, got {split_by!r}")
    unknown = 0 if fs.template_index is None else int((fs.template_index < 0).sum())
    if fs.template_index is None or unknown:
        raise ValueError(f"a split by template needs each row's template, and {unknown or fs.num_rows} of "
                         f"{fs.num_rows} rows have none: extract features from labels that record their template "
                         f"(`mine` writes it; make_judge.py adds it to an archive's older records)")
    return fs.template_index


@dataclass
class TrainReport:
    """What training measured. ``as_metrics()`` is stored in ``JudgeHead.meta["metrics"]``."""

    setup: str
    seed: int
    val_fraction: float
    split_by: str  # "prompt" or "template"
    refit_all: bool  # the saved head was fitted again on every row at the chosen C
    prompts: dict[str, int]  # {"train": P_train, "val": P_val}
    label_counts: dict[str, dict[str, int]]  # {"train"|"val": {"important": n, "unimportant": n}}
    dropped_nonfinite_rows: int
    c_grid: list[dict[str, float]]  # one row per C: C, val_roc_auc, n_iter, converged
    chosen_c: float
    val_roc_auc: float
    train_roc_auc: float
    max_important_accept: float
    threshold: float  # the default threshold (largest with val important_accept_rate <= max_important_accept)
    frontier: list[dict[str, float]]  # rows of .frontier.sweep_thresholds, thresholds ascending

    def as_metrics(self) -> dict:
        return asdict(self)

    def summary(self) -> str:
        at = next(r for r in self.frontier if r["threshold"] == self.threshold)
        lc = self.label_counts
        return "\n".join([
            f"setup {self.setup}: {self.prompts['train']} train / {self.prompts['val']} validation prompts (split by "
            f"{self.split_by}); "
            f"labels train {lc['train']['important']} important / {lc['train']['unimportant']} unimportant, "
            f"val {lc['val']['important']} / {lc['val']['unimportant']}",
            f"chosen C {self.chosen_c:.3g}: validation ROC-AUC {self.val_roc_auc:.4f} (train {self.train_roc_auc:.4f})"
            + ("; the saved head refitted on every row at that C" if self.refit_all else ""),
            f"default threshold {self.threshold:.6g} (rule: largest with validation important-accept rate <= "
            f"{self.max_important_accept:g}): accepts {at['accept_rate']:.1%} of validation mismatches, "
            f"{at['important_accept_rate']:.2%} of important ones",
            format_frontier(self.frontier, self.threshold),
        ])


def _fit(X: np.ndarray, y: np.ndarray, C: float, max_iter: int) -> tuple[LogisticRegression, bool]:
    model = LogisticRegression(C=C, solver="lbfgs", max_iter=max_iter)  # L2 is the default penalty
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ConvergenceWarning)
        model.fit(X, y)
    converged = not any(issubclass(w.category, ConvergenceWarning) for w in caught)
    return model, converged


def train_judge(
    featureset: FeatureSet,
    setup: str | None = None,
    seed: int = 0,
    c_grid: tuple[float, ...] | list[float] = DEFAULT_C_GRID,
    max_important_accept: float = DEFAULT_MAX_IMPORTANT_ACCEPT,
    val_fraction: float = 0.1,
    split_by: str = "prompt",
    refit_all: bool = False,
    drop_nonfinite: bool = False,
    num_quantiles: int = 101,
    max_iter: int = 1000,
    progress: bool = True,
) -> tuple[JudgeHead, TrainReport]:
    """Train a judge head on a feature set.

    Parameters
    ----------
    featureset : FeatureSet
        Labelled mismatches; its blocks must include those of ``setup``.
    setup : str, optional
        Feature setup of the judge (``"DT"``, ``"DD-DT"``, ...); default: all blocks of the set.
    seed : int
        Seed of the prompt split.
    c_grid : sequence of float
        Inverse L2 strengths to try; the best validation ROC-AUC wins.
    max_important_accept : float
        Default-threshold rule: the largest threshold whose validation important-accept rate
        (accepted important / all important) is at most this.
    val_fraction : float
        Fraction of the prompts (or templates) held out for validation.
    split_by : str
        The validation split's unit: ``"prompt"`` or ``"template"`` (module docstring).
    refit_all : bool
        Fit the saved head again on every row at the chosen C (module docstring).
    drop_nonfinite : bool
        Drop rows holding NaN/inf features (counted in the report) instead of raising.
    num_quantiles : int
        Number of validation-probability quantiles of the threshold sweep.
    max_iter : int
        lbfgs iteration limit per fit; fits that hit it are flagged ``converged: False``.
    progress : bool
        Show a progress bar over the C grid.

    Returns
    -------
    (JudgeHead, TrainReport)
        The head (fitted on the training prompts, default threshold set, metrics in
        ``meta["metrics"]``) and the report.
    """
    setup = featureset.setup if setup is None else setup
    fs = featureset.select_setup(setup)
    dropped = 0
    if drop_nonfinite:
        fs, dropped = fs.drop_nonfinite()
    fs.check_finite()
    counts = fs.label_counts()
    if min(counts.values()) == 0:
        only = "important" if counts["unimportant"] == 0 else "unimportant"
        raise ValueError(f"all {fs.num_rows} labels are {only}: a judge needs both classes; mine more prompts "
                         f"(or check the task checker, which decides the labels)")
    if not c_grid or any(c <= 0 for c in c_grid):
        raise ValueError(f"c_grid must be non-empty and positive, got {list(c_grid)}")

    train, val = split_by_group(split_groups(fs, split_by), val_fraction, seed, split_by)
    y_train, y_val = fs.labels[train].astype(np.int64), fs.labels[val].astype(np.int64)
    for name, y in (("training", y_train), ("validation", y_val)):
        if y.min() == y.max():
            raise ValueError(f"the {name} {split_by}s hold only {'important' if y[0] else 'unimportant'} labels, so "
                             f"ROC-AUC is undefined: mine more prompts or try another --seed")
    scaler = StandardScaler(copy=False)  # float32 throughout: sklearn's lbfgs keeps float32 inputs float32
    X_train = scaler.fit_transform(fs.features[train].astype(np.float32))  # [M_train, F]
    X_val = scaler.transform(fs.features[val].astype(np.float32))  # [M_val, F]

    grid_rows, best = [], None
    for C in tqdm(sorted(float(c) for c in c_grid), desc="judge C grid", disable=not progress):
        model, converged = _fit(X_train, y_train, C, max_iter)
        auc = float(roc_auc_score(y_val, model.predict_proba(X_val)[:, 1]))
        grid_rows.append({"C": C, "val_roc_auc": auc, "n_iter": int(model.n_iter_[0]), "converged": converged})
        if best is None or auc > best[0]:
            best = (auc, C, model)
    val_auc, chosen_c, model = best

    val_probs = model.predict_proba(X_val)[:, 1]
    frontier = sweep_thresholds(val_probs, y_val, num_quantiles)
    threshold = choose_threshold(frontier, max_important_accept)["threshold"]
    report = TrainReport(
        setup=fs.setup, seed=seed, val_fraction=val_fraction, split_by=split_by, refit_all=refit_all,
        prompts={"train": int(np.unique(fs.prompt_index[train]).size), "val": int(np.unique(fs.prompt_index[val]).size)},
        label_counts={"train": {"important": int(y_train.sum()), "unimportant": int((1 - y_train).sum())},
                      "val": {"important": int(y_val.sum()), "unimportant": int((1 - y_val).sum())}},
        dropped_nonfinite_rows=dropped, c_grid=grid_rows, chosen_c=chosen_c, val_roc_auc=val_auc,
        train_roc_auc=float(roc_auc_score(y_train, model.predict_proba(X_train)[:, 1])),
        max_important_accept=max_important_accept, threshold=threshold, frontier=frontier,
    )
    if refit_all:
        scaler = StandardScaler(copy=False)
        model, _ = _fit(scaler.fit_transform(fs.features.astype(np.float32)), fs.labels.astype(np.int64), chosen_c, max_iter)
    head = JudgeHead(
        coef=model.coef_[0], mean=scaler.mean_, scale=scaler.scale_, intercept=float(model.intercept_[0]),
        setup=fs.setup, draft_hidden=fs.draft_hidden, target_hidden=fs.target_hidden, threshold=threshold,
        meta={"task": fs.task, "draft_model": fs.draft_model, "target_model": fs.target_model, "dtype": fs.dtype,
              "metrics": report.as_metrics()},
    )
    return head, report

"""The feature-set file: one row per labelled mismatch, the input of judge training.

File format (format version 1), one safetensors file:
  tensors   features[M, F] float16   the feature vector of each mismatch (blocks of ``setup``)
            labels[M] int8           1 = important (the swap changed the answer), 0 = unimportant
            prompt_index[M] int32    the prompt the row was mined from: the train/validation split unit
            position[M] int32        token position of the mismatch in that prompt's sequence
            template_index[M] int32  the template the prompt was drawn from, -1 when unknown
                                     (optional: older files lack it; the template split's unit)
  metadata  "autojudge_features": JSON with format_version, setup, draft_hidden, target_hidden,
            draft_model, target_model, task, dtype (the models' compute dtype; float32 when absent)

The columns of ``features`` are the blocks of ``setup`` in its order, each as wide as the hidden
size of the model that produced it (see :func:`.head.feature_dim`). A file holding more blocks
than a judge needs (for example all four, ``DD-DT-TD-TT``) serves any subset through
:meth:`FeatureSet.select_setup`.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from .head import block_width, feature_dim, parse_setup
from .tagged_file import load_tagged, save_tagged

FEATURES_FORMAT_VERSION = 1
METADATA_KEY = "autojudge_features"
_META_FIELDS = ("setup", "draft_hidden", "target_hidden", "draft_model", "target_model", "task")
_OPTIONAL_META = {"dtype": "float32"}  # fields older files lack, with the value they had


@dataclass
class FeatureSet:
    """Labelled mismatch features, tied to the prompts and positions they were mined at.

    Parameters
    ----------
    features : np.ndarray
        Shape ``[M, F]``; stored as float16. ``F = feature_dim(setup, draft_hidden, target_hidden)``.
    labels : np.ndarray
        Shape ``[M]``; 1 = important, 0 = unimportant; stored as int8.
    prompt_index : np.ndarray
        Shape ``[M]``; non-negative prompt id of each row; stored as int32.
    position : np.ndarray
        Shape ``[M]``; non-negative token position of each mismatch; stored as int32.
    setup : str
        The blocks held in ``features``, ``'-'``-joined (``"DT"``, ``"DD-DT"``, ``"DD-DT-TD-TT"``, ...).
    draft_hidden, target_hidden : int
        Hidden sizes of the draft and target models.
    draft_model, target_model, task : str
        Identifiers of the models and the task family the labels were mined with.
    dtype : str
        Compute dtype of the models the features were extracted with (``"float32"``, ``"bfloat16"``).
    template_index : np.ndarray, optional
        Shape ``[M]``; the template of each row's prompt, -1 when unknown (user data, or labels mined
        before records kept their template); stored as int32. None: not recorded.
    """

    features: np.ndarray  # [M, F] float16
    labels: np.ndarray  # [M] int8
    prompt_index: np.ndarray  # [M] int32
    position: np.ndarray  # [M] int32
    setup: str
    draft_hidden: int
    target_hidden: int
    draft_model: str
    target_model: str
    task: str
    dtype: str = "float32"
    template_index: np.ndarray | None = None  # [M] int32

    def __post_init__(self):
        self.draft_hidden, self.target_hidden = int(self.draft_hidden), int(self.target_hidden)
        if self.draft_hidden < 1 or self.target_hidden < 1:
            raise ValueError(f"hidden sizes must be >= 1, got draft {self.draft_hidden}, target {self.target_hidden}")
        F = feature_dim(self.setup, self.draft_hidden, self.target_hidden)
        features = np.asarray(self.features)
        if features.ndim != 2:
            raise ValueError(f"features must be [M, F], got shape {features.shape}")
        M = features.shape[0]
        if M == 0:
            raise ValueError("the feature set is empty (no labelled mismatches): mine more prompts first")
        if features.shape[1] != F:
            raise ValueError(
                f"features have {features.shape[1]} columns, but setup {self.setup} with draft hidden "
                f"{self.draft_hidden} and target hidden {self.target_hidden} needs {F}: extract features "
                f"with the same models and setup, or fix the hidden sizes"
            )
        self.features = features.astype(np.float16, copy=False)
        labels = np.asarray(self.labels)
        if labels.shape != (M,):
            raise ValueError(f"labels must be [M] = [{M}], got shape {labels.shape}")
        if not np.all((labels == 0) | (labels == 1)):
            raise ValueError(f"labels must be 0 (unimportant) or 1 (important), found {sorted(set(labels.tolist()))[:5]}")
        self.labels = labels.astype(np.int8)
        for name in ("prompt_index", "position"):
            a = np.asarray(getattr(self, name))
            if a.shape != (M,):
                raise ValueError(f"{name} must be [M] = [{M}], got shape {a.shape}")
            if not np.issubdtype(a.dtype, np.integer) or a.min() < 0 or a.max() > np.iinfo(np.int32).max:
                raise ValueError(f"{name} must hold non-negative int32 values")
            setattr(self, name, a.astype(np.int32))
        if self.template_index is not None:
            t = np.asarray(self.template_index)
            if t.shape != (M,) or not np.issubdtype(t.dtype, np.integer) or t.min() < -1:
                raise ValueError(f"template_index must be [M] = [{M}] integers >= -1, got shape {t.shape}")
            self.template_index = t.astype(np.int32)

    @property
    def num_rows(self) -> int:
        return self.features.shape[0]

    @property
    def blocks(self) -> list[str]:
        return parse_setup(self.setup)

    def label_counts(self) -> dict[str, int]:
        important = int(self.labels.sum())
        return {"important": important, "unimportant": self.num_rows - important}

    def nonfinite_rows(self) -> np.ndarray:  # [M] bool
        """Rows holding a NaN or inf feature (float16 overflows past 65504)."""
        return ~np.all(np.isfinite(self.features), axis=1)

    def check_finite(self) -> None:
        """Raise when any row holds NaN or inf, saying how many and how to drop them."""
        bad = self.nonfinite_rows()
        if bad.any():
            first = int(np.argmax(bad))
            raise ValueError(
                f"{int(bad.sum())} of {self.num_rows} feature rows hold NaN or inf (first: prompt "
                f"{self.prompt_index[first]}, position {self.position[first]}); check the feature extraction "
                f"(float16 overflows past 65504) or drop those rows explicitly (FeatureSet.drop_nonfinite(), "
                f"train --drop-nonfinite)"
            )

    def subset(self, rows: np.ndarray) -> "FeatureSet":
        """The rows selected by ``rows`` (shape ``[M]`` bool or ``[K]`` int)."""
        return replace(self, features=self.features[rows], labels=self.labels[rows],
                       prompt_index=self.prompt_index[rows], position=self.position[rows],
                       template_index=None if self.template_index is None else self.template_index[rows])

    @classmethod
    def concat(cls, sets: list["FeatureSet"]) -> "FeatureSet":
        """One set of the rows of ``sets`` (mined and on-policy labels, say): prompts renumbered so that
        each set's stay apart, templates kept (unknown where a set has none); the sets must share
        setup, models, task and dtype."""
        if not sets:
            raise ValueError("concat needs at least one feature set")
        first = sets[0]
        for other in sets[1:]:
            differ = [k for k in (*_META_FIELDS, *_OPTIONAL_META) if getattr(other, k) != getattr(first, k)]
            if differ:
                raise ValueError(f"feature sets differ in {differ} ({[getattr(first, k) for k in differ]} vs "
                                 f"{[getattr(other, k) for k in differ]}): extract them with the same setup and models")
        offsets = np.cumsum([0] + [int(fs.prompt_index.max()) + 1 for fs in sets[:-1]])
        templates = [fs.template_index if fs.template_index is not None else np.full(fs.num_rows, -1, np.int32)
                     for fs in sets]
        return replace(first, features=np.concatenate([fs.features for fs in sets]),
                       labels=np.concatenate([fs.labels for fs in sets]),
                       prompt_index=np.concatenate([fs.prompt_index + o for fs, o in zip(sets, offsets)]),
                       position=np.concatenate([fs.position for fs in sets]),
                       template_index=np.concatenate(templates))

    def drop_nonfinite(self) -> tuple["FeatureSet", int]:
        """(the set without NaN/inf rows, how many rows were dropped)."""
        bad = self.nonfinite_rows()
        return self.subset(~bad), int(bad.sum())

    def select_setup(self, setup: str) -> "FeatureSet":
        """The feature columns of ``setup``, sliced out of the blocks this set holds.

        The requested blocks may be any subset of the held ones, in any order: the result's
        columns follow the order of ``setup``, as :class:`.head.JudgeHead` expects.
        """
        wanted, held = parse_setup(setup), self.blocks
        missing = [b for b in wanted if b not in held]
        if missing:
            raise ValueError(f"setup {setup} needs blocks {missing}, but this feature set holds only {self.setup}: "
                             f"extract features with a setup that includes them")
        starts, start = {}, 0
        for b in held:
            starts[b] = start
            start += block_width(b, self.draft_hidden, self.target_hidden)
        columns = np.concatenate([
            np.arange(starts[b], starts[b] + block_width(b, self.draft_hidden, self.target_hidden)) for b in wanted
        ])
        return replace(self, features=self.features[:, columns], setup="-".join(wanted))

    def metadata(self) -> dict:
        return {"format_version": FEATURES_FORMAT_VERSION, **{k: getattr(self, k) for k in (*_META_FIELDS, *_OPTIONAL_META)}}

    def save(self, path: str | Path) -> None:
        tensors = {"features": self.features, "labels": self.labels,
                   "prompt_index": self.prompt_index, "position": self.position}
        if self.template_index is not None:
            tensors["template_index"] = self.template_index
        save_tagged(path, tensors, METADATA_KEY, self.metadata())

    @classmethod
    def load(cls, path: str | Path) -> "FeatureSet":
        """Load and validate a feature-set file (structure only: see :meth:`check_finite`)."""
        meta, tensors = load_tagged(path, METADATA_KEY, "feature-set", FEATURES_FORMAT_VERSION)
        missing = [k for k in _META_FIELDS if k not in meta] + \
                  [k for k in ("features", "labels", "prompt_index", "position") if k not in tensors]
        if missing:
            raise ValueError(f"{path} lacks {missing}")
        if tensors["features"].dtype != np.float16:
            raise ValueError(f"{path}: features must be float16, found {tensors['features'].dtype}")
        try:
            return cls(tensors["features"], tensors["labels"], tensors["prompt_index"], tensors["position"],
                       **{k: meta[k] for k in _META_FIELDS}, **{k: meta.get(k, v) for k, v in _OPTIONAL_META.items()},
                       template_index=tensors.get("template_index"))
        except ValueError as e:
            raise ValueError(f"{path}: {e}") from e

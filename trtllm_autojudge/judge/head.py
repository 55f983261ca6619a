"""The judge head: StandardScaler + logistic regression, stored as one safetensors file.

File format (docs/judge.md), format version 1:
  tensors   coef[F], mean[F], scale[F], intercept[1]  (float32)
  metadata  "autojudge": JSON with format_version, setup ("DT", "DD-DT", ...), draft_hidden,
            target_hidden, threshold, task, draft_model, target_model, dtype (of the models whose
            hidden states it was trained on; float32 when absent), metrics

The score of a feature vector x is ``logit = w . x + c`` with the scaler folded in:
``w = coef / scale`` and ``c = intercept - sum(coef * mean / scale)``. A node is IMPORTANT
(rejected) when ``sigmoid(logit) >= threshold``.
"""
from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..dtype_record import check_artifact_dtype
from .lookahead import LOOKAHEAD_BLOCKS, NUM_SCORES, WINDOW_TOKENS_AFTER
from .tagged_file import load_tagged, save_tagged

FORMAT_VERSION = 1
# Feature blocks (docs/judge.md): <hidden of model> on <sequence carrying the token of>.
#   DD: draft's hidden on the draft-token sequence    DT: target's hidden on the draft-token sequence
#   TD: draft's hidden on the target-token sequence   TT: target's hidden on the target-token sequence
# and the lookahead blocks DT1, DT2, DD1, LS: the models' view one and two draft tokens after the
# swapped one (:mod:`.lookahead`).
FEATURE_BLOCKS = ("DD", "DT", "TD", "TT") + LOOKAHEAD_BLOCKS
INFERENCE_BLOCKS = ("DD", "DT") + LOOKAHEAD_BLOCKS  # the blocks available while decoding (the target token is unknown)


def parse_setup(setup: str) -> list[str]:
    blocks = setup.split("-")
    if not blocks or any(b not in FEATURE_BLOCKS for b in blocks) or len(set(blocks)) != len(blocks):
        raise ValueError(f"feature setup {setup!r} is not a '-'-joined list of distinct blocks from {FEATURE_BLOCKS}")
    return blocks


def block_width(block: str, draft_hidden: int, target_hidden: int) -> int:
    """Width of one feature block: the hidden size of the model named by its second letter, or the
    number of lookahead scores."""
    if block == "LS":
        return NUM_SCORES
    return draft_hidden if block[1] == "D" else target_hidden


def feature_dim(setup: str, draft_hidden: int, target_hidden: int) -> int:
    return sum(block_width(b, draft_hidden, target_hidden) for b in parse_setup(setup))


@dataclass
class JudgeHead:
    coef: np.ndarray  # [F] float32
    mean: np.ndarray  # [F] float32
    scale: np.ndarray  # [F] float32, > 0
    intercept: float
    setup: str
    draft_hidden: int
    target_hidden: int
    threshold: float = 0.5
    meta: dict = field(default_factory=dict)  # task, draft_model, target_model, metrics

    def __post_init__(self):
        self.coef, self.mean, self.scale = (np.asarray(a, np.float32).reshape(-1) for a in (self.coef, self.mean, self.scale))
        F = feature_dim(self.setup, self.draft_hidden, self.target_hidden)
        for name in ("coef", "mean", "scale"):
            a = getattr(self, name)
            if a.shape != (F,):
                raise ValueError(
                    f"judge {name} has {a.shape[0]} features, but setup {self.setup} with draft hidden "
                    f"{self.draft_hidden} and target hidden {self.target_hidden} needs {F}"
                )
            if not np.all(np.isfinite(a)):
                raise ValueError(f"judge {name} holds NaN or inf values")
        if not np.all(self.scale > 0):
            raise ValueError("judge scale must be > 0 everywhere (StandardScaler scale_)")
        if not math.isfinite(self.intercept):
            raise ValueError(f"judge intercept must be finite, got {self.intercept}")
        if not 0.0 <= self.threshold <= 1.0:
            raise ValueError(f"judge threshold must lie in [0, 1], got {self.threshold}")
        run = self.meta.get("min_run")
        if run is not None and (isinstance(run, bool) or not isinstance(run, int) or run < 2):
            raise ValueError(f"judge min_run must be a whole number of tokens >= 2 (absent: no minimum), got {run!r}")
        gate = self.meta.get("min_target_prob")
        if gate is not None and (isinstance(gate, bool) or not isinstance(gate, (int, float)) or not 0 < gate < 1):
            raise ValueError(f"judge min_target_prob must be a probability in (0, 1) (absent: no gate), got {gate!r}")

    @property
    def blocks(self) -> list[str]:
        return parse_setup(self.setup)

    @property
    def usable_while_decoding(self) -> bool:
        return all(b in INFERENCE_BLOCKS for b in self.blocks)

    @property
    def needs_draft_hidden(self) -> bool:
        return any(b.startswith("DD") for b in self.blocks)

    @property
    def lookahead(self) -> int:
        """Draft tokens a node needs after it for a verdict (0 without lookahead blocks)."""
        return max((WINDOW_TOKENS_AFTER.get(b, 0) for b in self.blocks), default=0)

    @property
    def min_run(self) -> int:
        """Tokens a judged acceptance must open (``meta["min_run"]``, decoding/modes.py JudgeRule; 1: any)."""
        return self.meta.get("min_run") or 1

    @property
    def min_target_prob(self) -> float:
        """The target's least probability of its own token at a judged mismatch (``meta["min_target_prob"]``,
        decoding/modes.py JudgeRule; 0: any)."""
        return float(self.meta.get("min_target_prob") or 0.0)

    def folded(self) -> tuple[np.ndarray, float]:
        """(w [F] float32, c): the scaler folded into one dot product."""
        w = (self.coef.astype(np.float64) / self.scale).astype(np.float32)
        c = float(self.intercept - np.sum(self.coef.astype(np.float64) * self.mean / self.scale))
        return w, c

    def logits(self, features: np.ndarray) -> np.ndarray:  # [M, F] -> [M]
        w, c = self.folded()
        features = np.asarray(features, np.float32)
        if features.ndim != 2 or features.shape[1] != w.shape[0]:
            raise ValueError(f"features must be [M, {w.shape[0]}] for setup {self.setup}, got {features.shape}")
        return features.astype(np.float64) @ w.astype(np.float64) + c

    def fingerprint(self) -> str:
        """16 hex digits of SHA-256 over what decides the verdicts (setup, sizes, weights, threshold, veto,
        minimum run, target-confidence gate):
        results record it, so a later run can tell which judge made them."""
        return self._hash(f"|{self.threshold!r}")

    def weights_fingerprint(self) -> str:
        """As :meth:`fingerprint` without the default threshold: what decides the verdicts at a given
        threshold, so the same judge calibrated again (another default) has the same one."""
        return self._hash("")

    def _hash(self, suffix: str) -> str:
        h = hashlib.sha256(f"{self.setup}|{self.draft_hidden}|{self.target_hidden}{suffix}".encode())
        for a in (self.coef, self.mean, self.scale, np.float32(self.intercept)):  # as the file stores them
            h.update(a.tobytes())
        if self.meta.get("veto"):  # a token veto (judge/veto.py) decides verdicts too
            h.update(np.asarray(self.meta["veto"]["token_ids"], np.int64).tobytes())
        if self.min_run > 1:  # so does a minimum run (JudgeRule)
            h.update(f"|min_run {self.min_run}".encode())
        if self.min_target_prob:  # and the target-confidence gate (JudgeRule)
            h.update(f"|min_target_prob {self.min_target_prob!r}".encode())
        return h.hexdigest()[:16]

    def describe(self) -> dict:
        """What a result records of the judge it ran with (the file's path is the caller's to add)."""
        metrics, certificate = self.meta.get("metrics", {}), self.meta.get("certificate")
        described = {"fingerprint": self.fingerprint(), "setup": self.setup, "default_threshold": self.threshold,
                     "val_roc_auc": metrics.get("val_roc_auc"), "labels": metrics.get("label_counts"),
                     "dtype": self.meta.get("dtype", "float32")}
        if self.min_run > 1:  # a rule of its verdicts (decoding/modes.py JudgeRule)
            described["min_run"] = self.min_run
        if self.min_target_prob:  # another (JudgeRule)
            described["min_target_prob"] = self.min_target_prob
        if certificate:  # the default was certified by `trtllm-autojudge calibrate` (evaluation/certificate.py)
            described["certificate"] = {k: v for k, v in certificate.items() if k != "question_ids"}
        return described

    def check_models(self, draft_hidden: int | None = None, target_hidden: int | None = None,
                     draft_model: str | None = None, target_model: str | None = None, dtype: str | None = None) -> None:
        """Refuse a judge trained on other models (the message names what differs); warn when the
        models run in another ``dtype`` than the judge's features were computed in."""
        if dtype is not None:
            check_artifact_dtype("the judge", self.meta.get("dtype"), dtype)
        problems = []
        if draft_hidden is not None and draft_hidden != self.draft_hidden:
            problems.append(f"draft hidden size {draft_hidden} != judge's {self.draft_hidden}")
        if target_hidden is not None and target_hidden != self.target_hidden:
            problems.append(f"target hidden size {target_hidden} != judge's {self.target_hidden}")
        for role, given in (("draft_model", draft_model), ("target_model", target_model)):
            trained = self.meta.get(role)
            if given is not None and trained and given != trained:
                problems.append(f"{role} {given!r} != the {trained!r} the judge was trained on")
        if problems:
            raise ValueError("judge does not match the models in use: " + "; ".join(problems)
                             + ". Train a judge for these models (trtllm-autojudge mine/train).")

    def save(self, path: str | Path) -> None:
        meta = dict(self.meta, format_version=FORMAT_VERSION, setup=self.setup, draft_hidden=self.draft_hidden,
                    target_hidden=self.target_hidden, threshold=self.threshold)
        tensors = {"coef": self.coef, "mean": self.mean, "scale": self.scale,
                   "intercept": np.array([self.intercept], np.float32)}
        save_tagged(path, tensors, "autojudge", meta)

    @classmethod
    def load(cls, path: str | Path, **expected) -> "JudgeHead":
        """Load and validate; ``expected`` goes to :meth:`check_models`."""
        meta, tensors = load_tagged(path, "autojudge", "judge", FORMAT_VERSION)
        missing = {"coef", "mean", "scale", "intercept"} - set(tensors)
        if missing:
            raise ValueError(f"{path} lacks tensors {sorted(missing)}")
        core = {k: meta.pop(k) for k in ("setup", "draft_hidden", "target_hidden", "threshold")}
        meta.pop("format_version")
        head = cls(tensors["coef"], tensors["mean"], tensors["scale"], float(tensors["intercept"].reshape(-1)[0]),
                   meta=meta, **core)
        head.check_models(**expected)
        return head

"""Judge features for mined labels (PAPER.md section 2).

For a label at position p of the final sequence, two sequences differ only at p: the DRAFT-token
sequence (the draft's token at p) and the TARGET-token sequence. Each model's final-norm hidden
state at p, where the swapped token is the INPUT, gives four blocks:
DD (draft on draft-seq), DT (target on draft-seq), TD (draft on target-seq), TT (target on
target-seq). Per record and model this costs two forwards: one over the final sequence (it holds
one of the two tokens at every labelled position) and one batched forward of the OTHER tokens,
each attending to the final sequence before its own position only.
"""
from __future__ import annotations

import sys

import numpy as np
import torch
from tqdm import tqdm

from ..backends.dtype import dtype_name
from ..backends.protocol import LanguageModel
from ..judge.dataset import FeatureSet
from ..judge.head import parse_setup

ALL_BLOCKS = "DD-DT-TD-TT"


def hidden_at_labels(lm: LanguageModel, seq: list[int], positions: list[int], other_tokens: list[int]):
    """Hidden states at ``positions`` of ``seq`` ([M, H]) and with ``other_tokens`` swapped in there ([M, H])."""
    end = max(positions) + 1
    session = lm.session()
    in_seq = session.forward(seq[:end]).hidden[positions]  # [M, H]
    M = len(positions)
    mask = torch.zeros(M, end + M, dtype=torch.bool)  # [M, end + M]
    for j, p in enumerate(positions):
        mask[j, :p] = True
        mask[j, end + j] = True
    swapped = session.forward(other_tokens, positions=positions, mask=mask).hidden  # [M, H]
    return in_seq, swapped


def record_features(target: LanguageModel, draft: LanguageModel, record: dict, setup: str = ALL_BLOCKS) -> np.ndarray:
    """[M, F] float32 features of one mined record's labels, blocks in ``setup`` order."""
    seq, labels = record["final_ids"], record["labels"]
    positions = [int(lab[0]) for lab in labels]
    draft_at = np.array([seq[p] == lab[3] for p, lab in zip(positions, labels)])  # [M]: seq holds the draft token
    other = [int(lab[2] if d else lab[3]) for d, lab in zip(draft_at, labels)]
    blocks = {}
    for name, lm in (("D", draft), ("T", target)):
        in_seq, swapped = (h.float().cpu().numpy() for h in hidden_at_labels(lm, seq, positions, other))
        d = draft_at[:, None]
        blocks["D" + name] = np.where(d, in_seq, swapped)  # model on the draft-token sequence
        blocks["T" + name] = np.where(d, swapped, in_seq)  # model on the target-token sequence
    return np.concatenate([blocks[b] for b in parse_setup(setup)], axis=1)


def extract_features(target: LanguageModel, draft: LanguageModel, records: list[dict], setup: str = ALL_BLOCKS,
                     task: str = "", progress: bool = True) -> FeatureSet:
    """A FeatureSet over every label of ``records`` (prompt_index = the record's index)."""
    feats, labels, prompt_index, position = [], [], [], []
    for i, rec in enumerate(tqdm(records, desc="features", unit="prompt", disable=not progress, file=sys.stderr)):
        if not rec["labels"]:
            continue
        feats.append(record_features(target, draft, rec, setup))
        labels += [int(lab[1]) for lab in rec["labels"]]
        prompt_index += [i] * len(rec["labels"])
        position += [int(lab[0]) for lab in rec["labels"]]
    if not feats:
        raise ValueError("the label file holds no labels: mine more prompts (or check the checker)")
    x = np.concatenate(feats)
    if np.abs(x).max() > np.finfo(np.float16).max:
        raise ValueError("hidden states exceed the float16 range of the feature file; report the models used")
    dtype = getattr(target, "dtype", None)
    return FeatureSet(x, np.asarray(labels), np.asarray(prompt_index), np.asarray(position), setup,
                      draft.hidden_size, target.hidden_size, getattr(draft, "name", ""), getattr(target, "name", ""), task,
                      dtype_name(dtype) if dtype is not None else "float32")

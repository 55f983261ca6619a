"""Judge features for mined labels (docs/judge.md).

For a label at position p of the final sequence, two sequences differ only at p: the DRAFT-token
sequence (the draft's token at p) and the TARGET-token sequence. Each model's final-norm hidden
state at p, where the swapped token is the INPUT, gives four blocks:
DD (draft on draft-seq), DT (target on draft-seq), TD (draft on target-seq), TT (target on
target-seq). Per record and model this costs two forwards: one over the final sequence (it holds
one of the two tokens at every labelled position) and one batched forward of the OTHER tokens,
each attending to the final sequence before its own position only. The lookahead blocks (DT1, DT2,
DD1, LS: :mod:`..judge.lookahead`) take a pass of their own: per model one forward over the final
sequence, then two batched draft forwards (the draft token and c1) and three target ones. That pass
gives DD and DT too, so a setup of inference blocks only needs no other.
"""
from __future__ import annotations

import sys

import numpy as np
import torch
from tqdm import tqdm

from ..judge.dataset import FeatureSet
from ..judge.head import parse_setup
from ..judge.lookahead import LOOKAHEAD_BLOCKS, lookahead_scores
from ..models.dtype import dtype_name
from ..models.protocol import LanguageModel

ALL_BLOCKS = "DD-DT-TD-TT"


def after_prefixes(session, end: int, positions: list[int], tokens: list[list[int]], greedy_steps: int = 0):
    """Feed, batched, each label's own run of tokens after ``seq[:p]`` (the session holds ``seq[:end]``).

    ``tokens[k][j]`` is label j's token at position ``p_j + k``; after the given runs, the model's own
    greedy token follows for ``greedy_steps`` more steps. Each token attends to ``seq[:p_j]`` and to
    its own run only. Returns hidden [S, M, H], logits [S, M, V] and the fed tokens [S, M], with S the
    number of steps.
    """
    M, hidden, logits, fed = len(positions), [], [], []
    run = list(tokens[0])
    for k in range(len(tokens) + greedy_steps):
        mask = torch.zeros(M, end + (k + 1) * M, dtype=torch.bool)  # [M, end + (k+1) M]
        for j, p in enumerate(positions):
            mask[j, :p] = True
            mask[j, end + j : end + (k + 1) * M : M] = True  # this label's tokens of steps 0..k
        out = session.forward(run, positions=[p + k for p in positions], mask=mask)
        hidden.append(out.hidden)
        logits.append(out.logits)
        fed.append(run)
        run = list(tokens[k + 1]) if k + 1 < len(tokens) else out.logits.argmax(-1).tolist()
    return torch.stack(hidden), torch.stack(logits), torch.tensor(fed)


def hidden_at_labels(lm: LanguageModel, seq: list[int], positions: list[int], other_tokens: list[int]):
    """Hidden states at ``positions`` of ``seq`` ([M, H]) and with ``other_tokens`` swapped in there ([M, H])."""
    end = max(positions) + 1
    session = lm.session()
    in_seq = session.forward(seq[:end]).hidden[positions]  # [M, H]
    swapped = after_prefixes(session, end, positions, [other_tokens])[0][0]  # [M, H]
    return in_seq, swapped


def lookahead_blocks(target: LanguageModel, draft: LanguageModel, seq: list[int], positions: list[int],
                     draft_tokens: list[int], blocks: list[str]) -> dict[str, np.ndarray]:
    """The lookahead blocks (:mod:`..judge.lookahead`) of labels at ``positions`` with the draft's
    token swapped in: the draft continues it greedily by c1, c2, as it would in a draft window, and
    the target runs over [draft token, c1, c2]. DD and DT come with them (their first step)."""
    end = max(positions) + 1
    d_sess = draft.session()
    d_sess.forward(seq[:end])
    d_hidden, d_logits, d_fed = after_prefixes(d_sess, end, positions, [draft_tokens], greedy_steps=1)  # [2, M, Hd], [2, M, V], [2, M]
    c1, c2 = d_fed[1], d_logits[1].argmax(-1)  # [M] each
    M = len(positions)
    t_sess = target.session()
    t_sess.forward(seq[:end])
    t_hidden, t_logits, _ = after_prefixes(t_sess, end, positions, [draft_tokens, c1.tolist(), c2.tolist()])  # [3, M, Ht], [3, M, V]
    out = {"DD": d_hidden[0], "DT": t_hidden[0], "DT1": t_hidden[1], "DT2": t_hidden[2], "DD1": d_hidden[1],
           "LS": lookahead_scores(t_logits[:2].flatten(0, 1), torch.arange(M), M + torch.arange(M), c1, c2)}
    return {b: out[b].float().cpu().numpy() for b in blocks if b in out}


def record_features(target: LanguageModel, draft: LanguageModel, record: dict, setup: str = ALL_BLOCKS) -> np.ndarray:
    """[M, F] float32 features of one mined record's labels, blocks in ``setup`` order."""
    seq, labels = record["final_ids"], record["labels"]
    positions = [int(lab[0]) for lab in labels]
    draft_at = np.array([seq[p] == lab[3] for p, lab in zip(positions, labels)])  # [M]: seq holds the draft token
    other = [int(lab[2] if d else lab[3]) for d, lab in zip(draft_at, labels)]
    wanted = parse_setup(setup)
    blocks = {}
    if any(b in LOOKAHEAD_BLOCKS for b in wanted):
        blocks.update(lookahead_blocks(target, draft, seq, positions, [int(lab[3]) for lab in labels], wanted))
    if any(b not in blocks for b in wanted):
        for name, lm in (("D", draft), ("T", target)):
            in_seq, swapped = (h.float().cpu().numpy() for h in hidden_at_labels(lm, seq, positions, other))
            d = draft_at[:, None]
            blocks["D" + name] = np.where(d, in_seq, swapped)  # model on the draft-token sequence
            blocks["T" + name] = np.where(d, swapped, in_seq)  # model on the target-token sequence
    return np.concatenate([blocks[b] for b in wanted], axis=1)


def extract_features(target: LanguageModel, draft: LanguageModel, records: list[dict], setup: str = ALL_BLOCKS,
                     task: str = "", progress: bool = True) -> FeatureSet:
    """A FeatureSet over every label of ``records`` (prompt_index = the record's index; template_index
    = the record's ``template``, -1 where it has none)."""
    feats, labels, prompt_index, position, template_index = [], [], [], [], []
    for i, rec in enumerate(tqdm(records, desc="features", unit="prompt", disable=not progress, file=sys.stderr)):
        if not rec["labels"]:
            continue
        feats.append(record_features(target, draft, rec, setup))
        labels += [int(lab[1]) for lab in rec["labels"]]
        prompt_index += [i] * len(rec["labels"])
        position += [int(lab[0]) for lab in rec["labels"]]
        template_index += [-1 if rec.get("template") is None else int(rec["template"])] * len(rec["labels"])
    if not feats:
        raise ValueError("the label file holds no labels: mine more prompts (or check the checker)")
    x = np.concatenate(feats)
    if np.abs(x).max() > np.finfo(np.float16).max:
        raise ValueError("hidden states exceed the float16 range of the feature file; report the models used")
    dtype = getattr(target, "dtype", None)
    return FeatureSet(x, np.asarray(labels), np.asarray(prompt_index), np.asarray(position), setup,
                      draft.hidden_size, target.hidden_size, getattr(draft, "name", ""), getattr(target, "name", ""), task,
                      dtype_name(dtype) if dtype is not None else "float32", np.asarray(template_index))

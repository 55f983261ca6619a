"""A draft LM head over a vocabulary subset (FR-Spec style): the task's most frequent tokens.

Batch-1 decoding reads every weight once per step, and the embedded draft's full LM head
(49,152 x 576) is 28M of its 49M parameters. A head over the S most frequent tokens of the task's
training responses reads S/V of that. The draft then proposes only subset tokens; the target still
verifies over the full vocabulary, so lossless decoding stays exact (a token outside the subset is a
draft miss, fixed by the correction token). The head does not touch the draft's hidden state (the
DD-DT judge feature).

A subset file (safetensors, metadata key ``autojudge_vocab_subset``) holds the token ids and their
counts, and a fingerprint of the tokenizer's vocabulary; :func:`load_subset` refuses a file made for
another tokenizer, saying why. ``build_scripts/make_draft_vocab.py`` makes one.
"""
from __future__ import annotations

import hashlib
import json
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Sequence

import numpy as np
import torch
from torch import nn

from ..judge.tagged_file import load_tagged, save_tagged

META_KEY = "autojudge_vocab_subset"
FORMAT_VERSION = 1
MIN_SIZE = 16  # at least the widest draft-tree level, so top-k never reaches outside the subset


def tokenizer_fingerprint(tokenizer) -> str:
    """sha256 (first 16 hex digits) of the tokenizer's token -> id map, added tokens included."""
    items = sorted(tokenizer.get_vocab().items(), key=lambda kv: (kv[1], kv[0]))
    return hashlib.sha256(json.dumps(items, ensure_ascii=False).encode()).hexdigest()[:16]


@dataclass
class VocabSubset:
    """Token ids a draft head may propose (increasing), with the counts they were chosen by."""

    token_ids: np.ndarray  # [S] int64, increasing, unique
    counts: np.ndarray  # [S] int64, occurrences in the counted text
    vocab_size: int  # V of the models (the head's full output width)
    fingerprint: str  # tokenizer_fingerprint of the tokenizer the ids belong to
    meta: dict = field(default_factory=dict)  # how it was made (source, counted tokens, coverage)

    def __post_init__(self):
        ids = np.asarray(self.token_ids, np.int64)
        if ids.ndim != 1 or len(ids) < MIN_SIZE:
            raise ValueError(f"a vocabulary subset needs at least {MIN_SIZE} token ids, got {len(ids)}")
        if np.any(np.diff(ids) <= 0) or ids[0] < 0 or ids[-1] >= self.vocab_size:
            raise ValueError(f"subset token ids must be increasing, unique and in [0, {self.vocab_size})")
        self.token_ids, self.counts = ids, np.asarray(self.counts, np.int64)

    @property
    def size(self) -> int:
        return len(self.token_ids)

    def save(self, path: str | Path) -> None:
        meta = {**self.meta, "format_version": FORMAT_VERSION, "vocab_size": int(self.vocab_size),
                "fingerprint": self.fingerprint, "size": self.size}
        save_tagged(path, {"token_ids": self.token_ids, "counts": self.counts}, META_KEY, meta)


def most_frequent(sources: Sequence[Counter], size: int, vocab_size: int, fingerprint: str,
                  always: Iterable[int] = (), meta: dict | None = None) -> VocabSubset:
    """``always`` (e.g. the end-of-turn token), then the most frequent tokens of each counter of
    ``sources`` in turn (ties: lower id first), then the lowest ids (a BPE vocabulary's merge order,
    roughly its corpus frequency) until ``size``. ``counts`` are the first source's; ``meta`` gains the
    share of its tokens the subset covers."""
    if not MIN_SIZE <= size <= vocab_size:
        raise ValueError(f"subset size must be in [{MIN_SIZE}, {vocab_size}], got {size}")
    chosen = dict.fromkeys(int(t) for t in always)
    ranked = [sorted(c, key=lambda t: (-c[t], t)) for c in sources] + [range(vocab_size)]
    for order in ranked:
        for tok in order:
            if len(chosen) >= size:
                break
            chosen.setdefault(int(tok))
    ids = np.array(sorted(chosen), np.int64)
    first = sources[0] if sources else Counter()
    total = sum(first.values())
    info = {**(meta or {}), "counted_tokens": int(total), "distinct_tokens": len(first),
            "coverage": sum(first[int(t)] for t in ids) / max(total, 1)}
    return VocabSubset(ids, np.array([first[int(t)] for t in ids], np.int64), vocab_size, fingerprint, info)


def load_subset(path: str | Path, tokenizer, vocab_size: int) -> VocabSubset:
    """Read a subset file and check it belongs to ``tokenizer`` and a model of ``vocab_size`` outputs.

    Raises ValueError naming what does not match (fingerprint, vocabulary size, ids).
    """
    meta, tensors = load_tagged(path, META_KEY, "vocabulary-subset", FORMAT_VERSION)
    mine = tokenizer_fingerprint(tokenizer)
    if meta.get("fingerprint") != mine:
        raise ValueError(f"{path} was made for a tokenizer with vocabulary fingerprint {meta.get('fingerprint')} "
                         f"({meta.get('tokenizer', 'unnamed')}); this tokenizer's is {mine}: remake it with "
                         "build_scripts/make_draft_vocab.py for these models")
    if int(meta.get("vocab_size", -1)) != vocab_size:
        raise ValueError(f"{path} was made for {meta.get('vocab_size')} model outputs, the draft has {vocab_size}")
    if "token_ids" not in tensors or "counts" not in tensors:
        raise ValueError(f"{path} lacks the 'token_ids' or 'counts' tensor: it is not a vocabulary-subset file")
    rest = {k: v for k, v in meta.items() if k not in ("format_version", "vocab_size", "fingerprint", "size")}
    return VocabSubset(tensors["token_ids"], tensors["counts"], vocab_size, mine, rest)


class SubsetHead(nn.Module):
    """The rows of an LM head for the subset's tokens: logits [T, V] float32, -inf outside the subset.

    Reads S x H weights per row instead of V x H (``rows``: an ``nn.Linear`` with the gathered
    rows, which :func:`..kernels.cpu_linear.pack_linears` can pack). :func:`reference_subset_logits` is the reference.
    """

    def __init__(self, lm_head: nn.Module, subset: VocabSubset):
        super().__init__()
        weight, bias = lm_head.weight.detach(), getattr(lm_head, "bias", None)  # [V, H], [V] or None
        if weight.shape[0] != subset.vocab_size:
            raise ValueError(f"the LM head has {weight.shape[0]} outputs, the subset {subset.vocab_size}")
        ids = torch.as_tensor(subset.token_ids, device=weight.device)  # [S] int64
        self.register_buffer("token_ids", ids)
        self.rows = nn.Linear(weight.shape[1], len(ids), bias=bias is not None, device=weight.device,
                              dtype=weight.dtype)
        self.rows.requires_grad_(False)
        self.rows.weight.copy_(weight[ids])  # [S, H]
        if bias is not None:
            self.rows.bias.copy_(bias.detach()[ids])
        self.vocab_size, self.subset = subset.vocab_size, subset

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:  # hidden [T, H] -> [T, V] float32
        sub = self.rows(hidden).float()  # [T, S]
        out = torch.full((hidden.shape[0], self.vocab_size), float("-inf"), device=hidden.device)  # [T, V]
        return out.index_copy_(1, self.token_ids, sub)


def reference_subset_logits(lm_head: nn.Module, hidden: torch.Tensor, token_ids: Sequence[int]) -> torch.Tensor:
    """The full head's logits [T, V] float32 with every token outside ``token_ids`` set to -inf."""
    full = lm_head(hidden).float()  # [T, V]
    keep = torch.zeros(full.shape[-1], dtype=torch.bool, device=full.device)
    keep[torch.as_tensor(list(token_ids), device=full.device)] = True
    return full.masked_fill(~keep, float("-inf"))

"""Speculative decoding of one sequence: the draft proposes a tree, the target verifies it in one
forward pass, and :func:`.acceptance.accept_tree` keeps the accepted prefix of the best path plus
the correction token. Words as in :mod:`.acceptance`.

KV caches: each model's session has consumed ``tokens[:cached_len]``; the rest (at least the root)
is PENDING and is fed at the start of the next forward. After a cycle the target keeps the cache
entries of the accepted nodes (computed on their tokens, judged ones included, so they stay valid)
and the correction token becomes the new root.
"""
from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from typing import Sequence

import numpy as np
import torch

from ..backends.protocol import LanguageModel, ModelSession
from .acceptance import accept_tree
from .modes import RelaxedRule, VerifyContext
from .tree import DraftTree


@dataclass
class CycleMetrics:
    accepted: int  # accepted draft tokens (the correction token is not counted)
    judged: int  # accepted draft tokens that were mismatches let through by the rule
    draft_nodes: int  # N: draft tokens proposed
    draft_forwards: int
    target_forwards: int
    t_draft: float  # seconds
    t_verify: float
    t_accept: float  # relaxed rule + path walk + cache commit
    t_rule: float  # the relaxed rule alone (the judge's overhead), part of t_accept


@dataclass
class GenerationResult:
    prompt_ids: list[int]
    tokens: list[int]  # generated tokens (prompt excluded)
    stop_reason: str  # "eos" or "budget"
    cycles: list[CycleMetrics] = field(default_factory=list)
    text: str | None = None

    @property
    def tokens_per_cycle(self) -> float:
        """Mean tokens emitted per target forward: accepted draft tokens + the correction token."""
        return (sum(c.accepted for c in self.cycles) + len(self.cycles)) / max(len(self.cycles), 1)

    def summary(self) -> dict:
        cyc = self.cycles
        total = lambda k: float(sum(getattr(c, k) for c in cyc))  # noqa: E731
        return {
            "new_tokens": len(self.tokens),
            "cycles": len(cyc),
            "accepted_per_cycle": total("accepted") / max(len(cyc), 1),
            "tokens_per_cycle": self.tokens_per_cycle,
            "judged_accepts": int(total("judged")),
            "target_forwards": int(total("target_forwards")),
            "draft_forwards": int(total("draft_forwards")),
            "t_draft": total("t_draft"),
            "t_verify": total("t_verify"),
            "t_accept": total("t_accept"),
            "t_rule": total("t_rule"),
            "stop_reason": self.stop_reason,
        }

    def cycle_table(self) -> list[dict]:
        return [asdict(c) for c in self.cycles]


def _sync(device: torch.device) -> float:
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    return time.perf_counter()


def _mask(visible: int, cached: int, attend: list[list[int]]) -> torch.Tensor:
    """[T, cached + T] bool: every new token sees cache entries [0, visible) plus its own list."""
    mask = torch.zeros(len(attend), cached + len(attend), dtype=torch.bool)
    mask[:, :visible] = True
    for i, cols in enumerate(attend):
        mask[i, cols] = True
    return mask


def _is_chain(tree: DraftTree) -> bool:
    return tree.parents == tuple(range(-1, tree.num_nodes))


def propose(
    session: ModelSession, tokens: list[int], tree: DraftTree, need_hidden: bool
) -> tuple[np.ndarray, torch.Tensor | None, dict[int, int], int]:
    """Draft the tree after ``tokens`` greedily (node n takes its parent's ranks[n]-th token).

    Returns node tokens [N], draft hidden states [N+1, Hd] (or None), the cache slot of every node
    the draft consumed, and the number of draft forwards.
    """
    out = session.forward(tokens[session.cached_len :])
    visible, root_pos = session.cached_len, len(tokens) - 1
    logits, hidden = {0: out.logits[-1]}, {0: out.hidden[-1]}
    node_tokens = np.zeros(tree.num_nodes, np.int64)
    slots: dict[int, int] = {}
    forwards, chain = 1, _is_chain(tree)
    for d, level in enumerate(tree.levels):
        for m in sorted({tree.parents[n] for n in level}):
            top = torch.topk(logits[m], max(tree.ranks[n] for n in level if tree.parents[n] == m) + 1).indices
            for n in level:
                if tree.parents[n] == m:
                    node_tokens[n - 1] = int(top[tree.ranks[n]])
        if d == len(tree.levels) - 1 and not need_hidden:
            break
        base = session.cached_len
        if chain:
            out = session.forward([int(node_tokens[level[0] - 1])])
        else:
            attend = [[slots[a] for a in tree.path_to(n)[:-1]] + [base + i] for i, n in enumerate(level)]
            out = session.forward(
                [int(node_tokens[n - 1]) for n in level],
                positions=[root_pos + int(tree.depths[n]) for n in level],
                mask=_mask(visible, base, attend),
            )
        forwards += 1
        for i, n in enumerate(level):
            slots[n], logits[n], hidden[n] = base + i, out.logits[i], out.hidden[i]
    draft_hidden = None
    if need_hidden:
        draft_hidden = torch.stack([hidden[n] for n in range(tree.num_nodes + 1)])  # [N+1, Hd]
    return node_tokens, draft_hidden, slots, forwards


def verify(session: ModelSession, tokens: list[int], tree: DraftTree, node_tokens: np.ndarray):
    """One target forward over the pending tokens and the whole tree.

    Returns logits [N+1, V] and hidden states [N+1, Ht] (row n: node n as the input token) and the
    cache length that holds the prefix up to the root.
    """
    pending = tokens[session.cached_len :]
    L, P = session.cached_len, len(pending)
    inputs = list(pending) + [int(t) for t in node_tokens]
    if _is_chain(tree):
        out = session.forward(inputs)
    else:
        root_pos = len(tokens) - 1
        attend = [list(range(L, L + i + 1)) for i in range(P)]
        attend += [list(range(L, L + P)) + [L + P + a - 1 for a in tree.path_to(n)] for n in range(1, tree.num_nodes + 1)]
        positions = list(range(L, L + P)) + [root_pos + int(tree.depths[n]) for n in range(1, tree.num_nodes + 1)]
        out = session.forward(inputs, positions=positions, mask=_mask(L, L, attend))
    return out.logits[P - 1 :], out.hidden[P - 1 :], L + P


def speculative_generate(
    target: LanguageModel,
    draft: LanguageModel,
    prompt_ids: Sequence[int],
    *,
    tree: DraftTree,
    rule: RelaxedRule | None = None,
    max_new_tokens: int = 256,
    stop_ids: Sequence[int] | None = None,
    tokenizer=None,
    fused: bool | None = None,
) -> GenerationResult:
    """Generate greedily with a draft tree; ``rule=None`` is lossless (== target greedy decoding).

    ``fused`` runs a judge rule and the path walk as one ``torch.ops.autojudge.accept`` call (the
    CUDA kernel on a GPU, the C++ host core on CPU) instead of the NumPy reference; the default is
    fused exactly when the models run on CUDA and the judge's setup is DT or DD-DT.
    """
    if len(prompt_ids) == 0:
        raise ValueError("prompt_ids is empty: speculative decoding needs at least one prompt token")
    if draft.vocab_size != target.vocab_size:
        raise ValueError(f"draft vocab {draft.vocab_size} != target vocab {target.vocab_size}: they must share a tokenizer")
    tokens, n_prompt = [int(t) for t in prompt_ids], len(prompt_ids)
    stop = set(target.eos_token_ids if stop_ids is None else stop_ids)
    t_sess, d_sess = target.session(), draft.session()
    device = getattr(target, "device", torch.device("cpu"))
    paths = tree.paths[None]  # [1, P, D+1]
    parents = np.asarray(tree.parents, np.int32)[None]  # [1, N+1]
    need_hidden = bool(rule is not None and rule.needs_draft_hidden)
    if fused is None:
        fused = device.type == "cuda" and getattr(rule, "fusable", False)
    if fused and not getattr(rule, "fusable", False):
        raise ValueError("fused acceptance needs a JudgeRule with setup DT or DD-DT")
    result = GenerationResult(list(tokens), [], "budget")
    while len(tokens) - n_prompt < max_new_tokens:
        t0 = _sync(device)
        node_tokens, draft_hidden, d_slots, d_forwards = propose(d_sess, tokens, tree, need_hidden)
        t1 = _sync(device)
        logits, hidden, keep = verify(t_sess, tokens, tree, node_tokens)
        t2 = _sync(device)
        ctx = VerifyContext(list(tokens), tree, node_tokens[None], parents, logits, hidden, draft_hidden)
        if fused:
            acc = rule.accept_fused(ctx, paths)
            t_rule = _sync(device) - t2
        else:
            relaxed = None if rule is None else rule(ctx)
            t_rule = _sync(device) - t2
            acc = accept_tree(node_tokens[None], logits.argmax(-1).cpu().numpy()[None], paths, relaxed)
        new = acc.tokens(0)
        nodes = [int(n) for n in paths[0, acc.best_path[0], 1 : acc.accepted_len[0] + 1]]
        t_sess.retain(keep, [keep + n - 1 for n in nodes])
        d_nodes = nodes[: next((i for i, n in enumerate(nodes) if n not in d_slots), len(nodes))]
        d_sess.retain(len(tokens), [d_slots[n] for n in d_nodes])
        t3 = _sync(device)
        result.cycles.append(CycleMetrics(int(acc.accepted_len[0]), int(acc.judged_count[0]), tree.num_nodes,
                                          d_forwards, 1, t1 - t0, t2 - t1, t3 - t2, t_rule))
        budget = max_new_tokens - (len(tokens) - n_prompt)
        for t in new[:budget]:
            tokens.append(t)
            if t in stop:
                result.stop_reason = "eos"
                break
        if result.stop_reason == "eos":
            break
    result.tokens = tokens[n_prompt:]
    if tokenizer is not None:
        result.text = tokenizer.decode(result.tokens, skip_special_tokens=True)
    return result


def greedy_generate(
    model: LanguageModel, prompt_ids: Sequence[int], max_new_tokens: int = 256, stop_ids: Sequence[int] | None = None
) -> list[int]:
    """Plain greedy decoding, one target forward per token (the baseline)."""
    stop = set(model.eos_token_ids if stop_ids is None else stop_ids)
    session, out_tokens = model.session(), []
    pending = [int(t) for t in prompt_ids]
    while len(out_tokens) < max_new_tokens:
        tok = int(session.forward(pending).logits[-1].argmax())
        out_tokens.append(tok)
        if tok in stop:
            break
        pending = [tok]
    return out_tokens

"""Speculative decoding of one sequence: the draft proposes a tree, the target verifies it in one
forward pass, and :func:`..spec.acceptance.accept_tree` keeps the accepted prefix of the best path plus
the correction token. Words as in :mod:`..spec.acceptance`.

KV caches: each model's session has consumed ``tokens[:cached_len]``; the rest (at least the root)
is PENDING and is fed at the start of the next forward. After a cycle the target keeps the cache
entries of the accepted nodes (computed on their tokens, judged ones included, so they stay valid)
and the correction token becomes the new root. The draft consumes the last level of the tree only
when a DD judge's walk may consult a last-level node (:func:`leaf_may_matter`): for a chain of K,
K draft forwards a cycle, K + 1 in the cycles whose first mismatch is the last node.
"""
from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from typing import Sequence

import numpy as np
import torch

from ..models.protocol import LanguageModel, ModelSession
from ..spec.acceptance import Acceptance, accept_tree
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
    # (index in tokens, draft token, target token) of every judged acceptance
    judged_tokens: list[tuple[int, int, int]] = field(default_factory=list)
    # a JudgeRule's threshold margin (lo, hi) over the response (modes.py); None when the rule
    # kept none (no JudgeRule, or the fused op)
    judge_margin: tuple[float, float] | None = None

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
            "judged_tokens": [list(j) for j in self.judged_tokens],
            "judge_margin": None if self.judge_margin is None else [_finite_or_none(m) for m in self.judge_margin],
        }

    def cycle_table(self) -> list[dict]:
        return [asdict(c) for c in self.cycles]


def _finite_or_none(x: float) -> float | None:  # JSON has no infinities
    return float(x) if np.isfinite(x) else None


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


@dataclass
class Proposal:
    """What the draft proposed in one cycle, and the draft state it left behind.

    The draft consumes every level but the last while drafting (it needs their logits); the last
    level's hidden states, which only a DD judge's verdict on a last-level node needs, are computed
    by :func:`feed_last_level` when the acceptance walk may consult such a node.
    """

    node_tokens: np.ndarray  # [N] int64: token of node n at index n-1
    slots: dict[int, int]  # cache slot of every node the draft consumed
    hidden: dict[int, torch.Tensor]  # node -> [Hd]: draft hidden state with that node as input
    forwards: int  # draft forwards so far
    visible: int  # draft cache entries up to the root (what every node sees besides its path)
    root_pos: int  # position of the root token

    def draft_hidden(self, num_nodes: int) -> torch.Tensor:
        """[N+1, Hd]: row n is node n's hidden state; NaN for a node not consumed (never accepted)."""
        rows = torch.full((num_nodes + 1, self.hidden[0].shape[-1]), float("nan"), dtype=self.hidden[0].dtype)
        for n, h in self.hidden.items():
            rows[n] = h
        return rows


def _feed_level(session: ModelSession, tree: DraftTree, prop: Proposal, level: list[int]):
    """One draft forward over the nodes of one level; records their cache slots and hidden states."""
    base = session.cached_len
    if tree.is_chain:
        out = session.forward([int(prop.node_tokens[level[0] - 1])])
    else:
        attend = [[prop.slots[a] for a in tree.path_to(n)[:-1]] + [base + i] for i, n in enumerate(level)]
        out = session.forward(
            [int(prop.node_tokens[n - 1]) for n in level],
            positions=[prop.root_pos + int(tree.depths[n]) for n in level],
            mask=_mask(prop.visible, base, attend),
        )
    prop.forwards += 1
    for i, n in enumerate(level):
        prop.slots[n], prop.hidden[n] = base + i, out.hidden[i]
    return out


def propose(session: ModelSession, tokens: list[int], tree: DraftTree) -> Proposal:
    """Draft the tree after ``tokens`` greedily (node n takes its parent's ranks[n]-th token).

    The last level is drafted but not consumed: see :func:`feed_last_level`.
    """
    out = session.forward(tokens[session.cached_len :])
    prop = Proposal(np.zeros(tree.num_nodes, np.int64), {}, {0: out.hidden[-1]}, 1, session.cached_len, len(tokens) - 1)
    logits = {0: out.logits[-1]}
    levels = tree.levels
    for d, level in enumerate(levels):
        for m in sorted({tree.parents[n] for n in level}):
            top = torch.topk(logits[m], max(tree.ranks[n] for n in level if tree.parents[n] == m) + 1).indices
            for n in level:
                if tree.parents[n] == m:
                    prop.node_tokens[n - 1] = int(top[tree.ranks[n]])
        if d < len(levels) - 1:
            out = _feed_level(session, tree, prop, level)
            logits.update((n, out.logits[i]) for i, n in enumerate(level))
    return prop


def feed_last_level(session: ModelSession, tree: DraftTree, prop: Proposal) -> None:
    """Consume the last level, so that :meth:`Proposal.draft_hidden` has every row."""
    _feed_level(session, tree, prop, tree.levels[-1])


def leaf_may_matter(accepted_len: int, tree: DraftTree) -> bool:
    """Whether a rule's verdict on a last-level node can change this cycle's acceptance.

    The walk consults a node's rule only when every ancestor was accepted, so with a best accepted
    length below D - 1 no leaf was reached on any path. A chain that reached its leaf and accepted
    it had an exact match there (no verdict needed); in a tree another leaf's verdict could still
    change the best path.
    """
    D = tree.max_depth
    return accepted_len == D - 1 if tree.is_chain else accepted_len >= D - 1


def verify(session: ModelSession, tokens: list[int], tree: DraftTree, node_tokens: np.ndarray):
    """One target forward over the pending tokens and the whole tree.

    Returns logits [N+1, V] and hidden states [N+1, Ht] (row n: node n as the input token) and the
    cache length that holds the prefix up to the root.
    """
    pending = tokens[session.cached_len :]
    L, P = session.cached_len, len(pending)
    inputs = list(pending) + [int(t) for t in node_tokens]
    if tree.is_chain:
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
    fused exactly when the models run on CUDA and the rule is fusable (``JudgeRule.fusable``: any
    judge setup, without a token veto or a per-response limit).
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
    # a lookahead judge has no verdict on the deepest level (no draft token after it) and reads none
    # of its draft hidden states (judge/lookahead.py): that level is never fed for it
    need_leaves = need_hidden and not getattr(rule, "lookahead", 0)
    if fused is None:
        fused = device.type == "cuda" and getattr(rule, "fusable", False)
    if fused and not getattr(rule, "fusable", False):
        raise ValueError("fused acceptance needs a JudgeRule the compiled core implements (JudgeRule.fusable: no token "
                         "veto, no per-response limit)")
    result = GenerationResult(list(tokens), [], "budget")
    margin = [-np.inf, np.inf]  # the response's threshold margin (modes.py); None once a cycle kept none
    judged_so_far = 0

    def decide(ctx: VerifyContext) -> tuple[Acceptance, float]:  # the acceptance, and the rule's seconds
        nonlocal margin
        if fused:
            t = _sync(device)
            acc = rule.accept_fused(ctx, paths)
            margin = None
            return acc, _sync(device) - t
        target_argmax = ctx.target_argmax[None]  # [1, N+1]: the walk's, computed before the rule's clock starts
        t = _sync(device)
        relaxed = None if rule is None else rule(ctx)
        t_rule = _sync(device) - t
        if ctx.judge_margin is None:
            margin = None
        elif margin is not None:
            margin = [max(margin[0], ctx.judge_margin[0]), min(margin[1], ctx.judge_margin[1])]
        return accept_tree(ctx.draft_tokens, target_argmax, paths, relaxed), t_rule

    while len(tokens) - n_prompt < max_new_tokens:
        t0 = _sync(device)
        prop = propose(d_sess, tokens, tree)
        t1 = _sync(device)
        logits, hidden, keep = verify(t_sess, tokens, tree, prop.node_tokens)
        t2 = _sync(device)
        ctx = VerifyContext(list(tokens), tree, prop.node_tokens[None], parents, logits, hidden,
                            prop.draft_hidden(tree.num_nodes) if need_hidden else None, judged_so_far)
        acc, t_rule = decide(ctx)
        t_leaves = 0.0
        if need_leaves and leaf_may_matter(int(acc.accepted_len[0]), tree):
            # the walk reached the last level, whose draft hidden rows were NaN (never accepted):
            # feed it and decide again, as if it had been fed while drafting (the same acceptance)
            t_l = _sync(device)
            feed_last_level(d_sess, tree, prop)
            t_leaves = _sync(device) - t_l
            ctx.draft_hidden = prop.draft_hidden(tree.num_nodes)
            acc, t_again = decide(ctx)
            t_rule += t_again
        new = acc.tokens(0)
        nodes = [int(n) for n in paths[0, acc.best_path[0], 1 : acc.accepted_len[0] + 1]]
        if acc.judged_count[0]:
            judged_so_far += int(acc.judged_count[0])
            result.judged_tokens += [(len(tokens) - n_prompt + i, int(prop.node_tokens[n - 1]),
                                      int(ctx.target_argmax[tree.parents[n]]))
                                     for i, n in enumerate(nodes) if prop.node_tokens[n - 1] != ctx.target_argmax[tree.parents[n]]]
        t_sess.retain(keep, [keep + n - 1 for n in nodes])
        d_nodes = nodes[: next((i for i, n in enumerate(nodes) if n not in prop.slots), len(nodes))]
        d_sess.retain(len(tokens), [prop.slots[n] for n in d_nodes])
        t3 = _sync(device)
        result.cycles.append(CycleMetrics(int(acc.accepted_len[0]), int(acc.judged_count[0]), tree.num_nodes,
                                          prop.forwards, 1, t1 - t0 + t_leaves, t2 - t1, t3 - t2 - t_leaves, t_rule))
        budget = max_new_tokens - (len(tokens) - n_prompt)
        for t in new[:budget]:
            tokens.append(t)
            if t in stop:
                result.stop_reason = "eos"
                break
        if result.stop_reason == "eos":
            break
    result.tokens = tokens[n_prompt:]
    result.judged_tokens = [j for j in result.judged_tokens if j[0] < len(result.tokens)]  # the budget may cut the last cycle
    if rule is not None:
        result.judge_margin = None if margin is None else (float(margin[0]), float(margin[1]))
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

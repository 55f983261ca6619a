"""Speculative decoding of one sequence: a drafter (:mod:`.drafter`) proposes a tree, the target
verifies it in one forward pass, and :func:`..spec.acceptance.accept_tree` keeps the accepted prefix of
the best path plus the correction token. Words as in :mod:`..spec.acceptance`.

KV caches: the target's session has consumed ``tokens[:cached_len]``; the rest (at least the root)
is PENDING and is fed at the start of the next forward. After a cycle the target keeps the cache
entries of the accepted nodes (computed on their tokens, judged ones included, so they stay valid)
and the correction token becomes the new root; the drafter is told the outcome
(:meth:`.drafter.DraftSession.commit`), with the target's hidden states of the consumed tokens when it
reads them (EAGLE). A model drafter consumes the last level of the tree only when a DD judge's walk
may consult a last-level node (:func:`leaf_may_matter`): for a chain of K, K draft forwards a cycle,
K + 1 in the cycles whose first mismatch is the last node.
"""
from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from typing import Sequence

import numpy as np
import torch

from ..models.protocol import LanguageModel, ModelSession
from ..spec.acceptance import Acceptance, accept_tree
from .drafter import Drafter
from .dynamic_tree import DynamicTree
from .model_drafter import ModelDrafter, feed_last_level, propose  # noqa: F401 (propose, feed_last_level: importers' API)
from .modes import RelaxedRule, VerifyContext
from .tree import DraftTree, attention_mask


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


def leaf_may_matter(accepted_len: int, tree: DraftTree) -> bool:
    """Whether a rule's verdict on a last-level node can change this cycle's acceptance.

    The walk consults a node's rule only when every ancestor was accepted, so with a best accepted
    length below D - 1 no leaf was reached on any path. A chain that reached its leaf and accepted
    it had an exact match there (no verdict needed); in a tree another leaf's verdict could still
    change the best path.
    """
    D = tree.max_depth
    return accepted_len == D - 1 if tree.is_chain else accepted_len >= D - 1


def tree_forward(session: ModelSession, tokens: list[int], tree: DraftTree, node_tokens: np.ndarray):
    """One target forward over the pending tokens and the whole tree.

    Returns the forward's output (rows: the P pending tokens, the root last among them, then the N
    nodes), P, and the cache length that holds the prefix up to the root.
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
        out = session.forward(inputs, positions=positions, mask=attention_mask(L, L, attend))
    return out, P, L + P


def verify(session: ModelSession, tokens: list[int], tree: DraftTree, node_tokens: np.ndarray):
    """:func:`tree_forward`'s logits [N+1, V] and hidden states [N+1, Ht] (row n: node n as the input
    token) and the cache length that holds the prefix up to the root."""
    out, P, keep = tree_forward(session, tokens, tree, node_tokens)
    return out.logits[P - 1 :], out.hidden[P - 1 :], keep


def as_drafter(draft: LanguageModel | Drafter) -> Drafter:
    """A :class:`.drafter.Drafter` as it is, a language model as a :class:`.model_drafter.ModelDrafter`."""
    return draft if isinstance(draft, Drafter) else ModelDrafter(draft)


def speculative_generate(
    target: LanguageModel,
    draft: LanguageModel | Drafter,
    prompt_ids: Sequence[int],
    *,
    tree: DraftTree | DynamicTree,
    rule: RelaxedRule | None = None,
    max_new_tokens: int = 256,
    stop_ids: Sequence[int] | None = None,
    tokenizer=None,
    fused: bool | None = None,
) -> GenerationResult:
    """Generate greedily with a draft tree; ``rule=None`` is lossless (== target greedy decoding).

    ``draft`` is a draft language model (drafting static trees) or any :class:`.drafter.Drafter`,
    e.g. :class:`.eagle_drafter.EagleDrafter`, which also takes a :class:`.dynamic_tree.DynamicTree`.
    ``fused`` runs a judge rule and the path walk as one ``torch.ops.autojudge.accept`` call (the
    CUDA kernel on a GPU, the C++ host core on CPU) instead of the NumPy reference; the default is
    fused exactly when the models run on CUDA and the rule is fusable (``JudgeRule.fusable``: any
    judge setup, without a token veto, a target-confidence gate or a per-response limit).
    """
    if len(prompt_ids) == 0:
        raise ValueError("prompt_ids is empty: speculative decoding needs at least one prompt token")
    drafter = as_drafter(draft)
    if drafter.vocab_size != target.vocab_size:
        raise ValueError(f"draft vocab {drafter.vocab_size} != target vocab {target.vocab_size}: they must share a "
                         f"tokenizer")
    need_hidden = bool(rule is not None and rule.needs_draft_hidden)
    if need_hidden and not drafter.has_draft_hidden:
        raise ValueError(f"judge setup {getattr(getattr(rule, 'head', None), 'setup', '?')} reads the draft's hidden "
                         f"states (blocks DD, DD1), and the {drafter.name} has none: it drafts from the target's own "
                         f"hidden states, with no draft model. Use a target-only judge (DT, DT-DT1-DT2-LS) with it, or "
                         f"draft with a draft model")
    tokens, n_prompt = [int(t) for t in prompt_ids], len(prompt_ids)
    stop = set(target.eos_token_ids if stop_ids is None else stop_ids)
    t_sess, d_sess = target.session(), drafter.start()
    device = getattr(target, "device", torch.device("cpu"))
    # a lookahead judge has no verdict on the deepest level (no draft token after it) and reads none
    # of its draft hidden states (judge/lookahead.py): that level is never fed for it
    need_leaves = need_hidden and not getattr(rule, "lookahead", 0)
    if fused is None:
        fused = device.type == "cuda" and getattr(rule, "fusable", False)
    if fused and not getattr(rule, "fusable", False):
        raise ValueError("fused acceptance needs a JudgeRule the compiled core implements (JudgeRule.fusable: no token "
                         "veto, no target-confidence gate, no per-response limit)")
    result = GenerationResult(list(tokens), [], "budget")
    margin = [-np.inf, np.inf]  # the response's threshold margin (modes.py); None once a cycle kept none
    judged_so_far = 0

    def decide(ctx: VerifyContext, paths: np.ndarray) -> tuple[Acceptance, float]:  # the acceptance, the rule's seconds
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
        prop = d_sess.propose(tokens, tree)
        ptree = prop.tree  # the tree drafted this cycle
        paths = ptree.paths[None]  # [1, P, D+1]
        parents = np.asarray(ptree.parents, np.int32)[None]  # [1, N+1]
        t1 = _sync(device)
        out, P, keep = tree_forward(t_sess, tokens, ptree, prop.node_tokens)
        logits, hidden = out.logits[P - 1 :], out.hidden[P - 1 :]  # [N+1, V], [N+1, Ht]: node n as the input
        t2 = _sync(device)
        ctx = VerifyContext(list(tokens), ptree, prop.node_tokens[None], parents, logits, hidden,
                            prop.draft_hidden(ptree.num_nodes) if need_hidden else None, judged_so_far)
        acc, t_rule = decide(ctx, paths)
        t_leaves = 0.0
        if need_leaves and leaf_may_matter(int(acc.accepted_len[0]), ptree):
            # the walk reached the last level, whose draft hidden rows were NaN (never accepted):
            # feed it and decide again, as if it had been fed while drafting (the same acceptance)
            t_l = _sync(device)
            d_sess.feed_last_level(prop)
            t_leaves = _sync(device) - t_l
            ctx.draft_hidden = prop.draft_hidden(ptree.num_nodes)
            acc, t_again = decide(ctx, paths)
            t_rule += t_again
        new = acc.tokens(0)
        nodes = [int(n) for n in paths[0, acc.best_path[0], 1 : acc.accepted_len[0] + 1]]
        if acc.judged_count[0]:
            judged_so_far += int(acc.judged_count[0])
            result.judged_tokens += [(len(tokens) - n_prompt + i, int(prop.node_tokens[n - 1]),
                                      int(ctx.target_argmax[ptree.parents[n]]))
                                     for i, n in enumerate(nodes) if prop.node_tokens[n - 1] != ctx.target_argmax[ptree.parents[n]]]
        t_sess.retain(keep, [keep + n - 1 for n in nodes])
        consumed = None  # [P + len(nodes), Ht]: the target's states of the pending tokens and the accepted nodes
        if drafter.reads_target_hidden:
            consumed = torch.cat([out.hidden[:P], hidden[nodes]]) if nodes else out.hidden[:P]
        d_sess.commit(tokens + new, prop, nodes, consumed)
        t3 = _sync(device)
        result.cycles.append(CycleMetrics(int(acc.accepted_len[0]), int(acc.judged_count[0]), ptree.num_nodes,
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

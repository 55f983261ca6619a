"""Acceptance modes for the speculative loop: each builds the ``relaxed`` mask of one cycle.

``lossless`` is no rule at all (``make_rule("lossless") is None``): only exact matches are
accepted, so the output equals greedy decoding of the target token for token.

The judge's THRESHOLD MARGIN: a response decoded at threshold t depends on t only through the
comparisons ``judge_logit < logit(t)`` at the nodes whose verdict the walk may read. With ``lo``
the largest of those logits below the cut and ``hi`` the smallest at or above it, every threshold
t' with ``lo < logit(t') <= hi`` makes the same comparisons, so it decodes the same tokens. Each
cycle's :class:`JudgeRule` call leaves its ``(lo, hi)`` in :attr:`VerifyContext.judge_margin`; the
speculative loop folds them over the response, and ``eval``/``calibrate`` reuse a run for every
threshold inside it (:mod:`..evaluation.runner`).
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Mapping, Protocol

import numpy as np
import torch

from ..judge.head import INFERENCE_BLOCKS, JudgeHead
from ..judge.lookahead import node_lookahead
from ..judge.veto import veto_table
from ..spec.acceptance import Acceptance
from .rules import (check_threshold, exact_runs, judge_relaxed, limit_judged, mtp_relaxed, threshold_logit,
                    topk_relaxed, typical_relaxed)
from .tree import DraftTree


@dataclass
class VerifyContext:
    """What a rule may look at in one verification cycle (batch of one sequence)."""

    prefix: list[int]  # prompt + output so far; the root token is prefix[-1]
    tree: DraftTree
    draft_tokens: np.ndarray  # [1, N] int64: token of node n at column n-1
    parents: np.ndarray  # [1, N+1] int32: parent node of each node, -1 for the root
    target_logits: torch.Tensor  # [N+1, V]: target's prediction for the child of each node
    target_hidden: torch.Tensor  # [N+1, Ht]: target's final-norm hidden state, node token as input
    draft_hidden: torch.Tensor | None  # [N+1, Hd]: same for the draft (only if the rule needs it)
    judged_so_far: int = 0  # judged acceptances earlier in this response
    judge_margin: tuple[float, float] | None = None  # set by JudgeRule: (lo, hi) of this cycle (module docstring)

    def logits_np(self) -> np.ndarray:  # [1, N+1, V] float32
        return self.target_logits.float().cpu().numpy()[None]

    @cached_property
    def target_argmax(self) -> np.ndarray:  # [N+1] int64: the target's greedy child of each node
        return self.target_logits.argmax(-1).cpu().numpy()

    def mismatches(self) -> np.ndarray:  # [M] int64: the nodes whose draft token is not that greedy child
        """The nodes a relaxed rule decides: every other node is an exact match (accepted by the walk)."""
        return 1 + np.flatnonzero(self.draft_tokens[0] != self.target_argmax[self.parents[0, 1:]])


def target_token_prob(
    target_logits: torch.Tensor,  # [N+1, V]: row n with node n as the input token
    rows: np.ndarray,  # [M] int: the parent row of each mismatch
) -> np.ndarray:  # [M] float64: the target's probability of its own (greedy) token there
    """The largest softmax probability of each row: 1 / sum(exp(logits - max))."""
    x = target_logits[torch.as_tensor(rows, device=target_logits.device)].double()  # [M, V]
    return (1.0 / torch.exp(x - x.max(-1, keepdim=True).values).sum(-1)).cpu().numpy()


class RelaxedRule(Protocol):
    needs_draft_hidden: bool

    def __call__(self, ctx: VerifyContext) -> np.ndarray:  # [1, N+1] bool
        ...


class JudgeRule:
    """AutoJudge: accept a mismatch when the judge's logit is below logit(threshold).

    ``max_judged`` (None: no limit) caps the judged acceptances of one response: once a response has
    that many, the rest of it is decoded losslessly (:func:`.rules.limit_judged` within a cycle).
    A judge file with a token veto (:mod:`..judge.veto`) never has its verdict asked on a mismatch
    whose draft or target token is vetoed: such a node is rejected at every threshold. A judge file
    with a minimum run (``meta["min_run"]`` = m, ``--min-run``) never has its verdict asked on a
    mismatch that would open fewer than m tokens through the exact matches below it
    (:func:`.rules.exact_runs`): a judged acceptance costs the same risk wherever it falls, so the
    rule spends it only where it buys at least m tokens. A judge file with a target-confidence gate
    (``meta["min_target_prob"]`` = p, ``--min-target-prob``) never has its verdict asked on a
    mismatch where the target gave its own token less than probability p: there the draft's token is
    an alternative the target weighs too, and on the program task such swaps (another quantity or
    entity of the question) change answers more often than the judge can tell
    (docs/notebook/certification.md, "A probe: the target's view after a judged acceptance"). All
    three depend on the draft and the target, not on the threshold, so the threshold margin (module
    docstring) holds as it is.
    """

    def __init__(self, head: JudgeHead, threshold: float | None = None, max_judged: int | None = None):
        if not head.usable_while_decoding:
            raise ValueError(f"judge setup {head.setup} needs target-token blocks (TD/TT), which do not exist "
                             f"while decoding: train with a setup of the blocks {INFERENCE_BLOCKS}")
        if max_judged is not None and max_judged < 0:
            raise ValueError(f"max_judged is a number of judged acceptances per response: give 0 or more, got {max_judged}")
        self.head = head
        self.threshold = head.threshold if threshold is None else float(threshold)
        check_threshold(self.threshold, 1)  # here, not per cycle: a cycle without a mismatch never reaches judge_relaxed
        self.cut = float(threshold_logit(self.threshold))
        self.max_judged = max_judged
        self.min_run = head.min_run
        self.min_target_prob = head.min_target_prob
        self._veto: np.ndarray | None = None  # [V] bool, built at the first cycle (the vocabulary size is the logits')
        self.needs_draft_hidden = head.needs_draft_hidden
        self.lookahead = head.lookahead  # draft tokens a node needs after it for a verdict
        self.w, self.c = head.folded()

    @classmethod
    def at_default(cls, head: JudgeHead, threshold: float | None = None) -> "JudgeRule":
        """The judge file's own operating point: its default threshold (or ``threshold``) and its
        per-response limit (``meta["max_judged"]``, set by ``calibrate --max-judged``; none if absent)."""
        return cls(head, threshold, head.meta.get("max_judged"))

    def judge_logits(self, ctx: VerifyContext, nodes: np.ndarray | None = None) -> np.ndarray:
        """[1, N+1] judge logits at ``nodes`` ([M] int; default every node), +inf (rejected) at the
        other nodes and at nodes without a verdict."""
        N = ctx.tree.num_nodes
        nodes = np.arange(N + 1) if nodes is None else np.asarray(nodes, np.int64)  # [M]
        rows = torch.as_tensor(nodes)
        blocks = {"DT": ctx.target_hidden[rows], "DD": None if ctx.draft_hidden is None else ctx.draft_hidden[rows]}
        has_verdict = np.ones(len(nodes), bool)  # [M]
        if self.head.lookahead:
            more, has_verdict = node_lookahead(self.head.blocks, ctx.tree.greedy_child, ctx.draft_tokens[0], nodes,
                                               ctx.target_logits, ctx.target_hidden, ctx.draft_hidden)
            blocks.update(more)
        x = torch.cat([blocks[b].float() for b in self.head.blocks], dim=-1)  # [M, F]
        logit = x.cpu().double().numpy() @ self.w.astype(np.float64) + self.c  # [M]
        out = np.full(N + 1, np.inf)
        out[nodes] = np.where(has_verdict, logit, np.inf)
        return out[None]

    def __call__(self, ctx: VerifyContext) -> np.ndarray:  # [1, N+1] bool
        relaxed = np.zeros((1, ctx.tree.num_nodes + 1), bool)
        ctx.judge_margin = (-np.inf, np.inf)
        remaining = None if self.max_judged is None else self.max_judged - ctx.judged_so_far
        nodes = self.judgeable(ctx, ctx.mismatches())  # the only nodes whose verdict the walk reads
        if len(nodes) == 0 or (remaining is not None and remaining <= 0):
            return relaxed
        logits = self.judge_logits(ctx, nodes)  # [1, N+1]
        relaxed = judge_relaxed(logits, self.threshold)
        if remaining is not None:
            relaxed = limit_judged(relaxed, ctx.parents, remaining)
        ctx.judge_margin = self.margin(logits[0], nodes, relaxed[0], ctx.tree)
        return relaxed

    def judgeable(self, ctx: VerifyContext, nodes: np.ndarray) -> np.ndarray:  # [M] -> [M'] int64
        """The mismatching ``nodes`` whose draft and target tokens are both outside the judge's veto,
        that open a run of at least the judge's minimum run, and where the target gave its own token
        at least the judge's ``min_target_prob``."""
        if self.min_run > 1 and len(nodes):
            runs = exact_runs(ctx.draft_tokens, ctx.target_argmax[None], ctx.tree.paths[None])  # [1, N+1]
            nodes = nodes[runs[0, nodes] >= self.min_run]
        if self.min_target_prob and len(nodes):
            nodes = nodes[target_token_prob(ctx.target_logits, ctx.parents[0, nodes]) >= self.min_target_prob]
        veto = self.head.meta.get("veto")
        if not veto or len(nodes) == 0:
            return nodes
        if self._veto is None:
            self._veto = veto_table(veto, ctx.target_logits.shape[-1])
        draft, target = ctx.draft_tokens[0, nodes - 1], ctx.target_argmax[ctx.parents[0, nodes]]
        return nodes[~(self._veto[draft] | self._veto[target])]

    def margin(self, logits: np.ndarray, nodes: np.ndarray, relaxed: np.ndarray, tree: DraftTree) -> tuple[float, float]:
        """(lo, hi) of one cycle (module docstring) over the judged ``nodes`` ([M], ascending) whose
        verdict the walk may read: on a chain, the mismatches up to the first one not relaxed (the
        walk stops there); on a tree, all of them. ``logits`` and ``relaxed`` are [N+1]."""
        read = nodes
        if tree.is_chain:
            stops = np.flatnonzero(~relaxed[nodes])
            read = nodes if len(stops) == 0 else nodes[: stops[0] + 1]
        x = logits[read]
        x = x[np.isfinite(x)]  # a non-finite logit is rejected at every threshold
        below, above = x[x < self.cut], x[x >= self.cut]
        return (float(below.max()) if len(below) else -np.inf, float(above.min()) if len(above) else np.inf)

    @property
    def fusable(self) -> bool:
        """Whether ``torch.ops.autojudge.accept`` implements this judge: any setup of the blocks the
        compiled core computes (spec/judge_blocks.py: DT, DD, DT1, DT2, DD1, LS), without a token veto,
        a target-confidence gate or a per-response limit (a minimum run it applies)."""
        from ..spec.judge_blocks import BLOCK_CODES

        return (all(b in BLOCK_CODES for b in self.head.blocks) and not self.head.meta.get("veto")
                and not self.min_target_prob and self.max_judged is None)

    def accept_fused(self, ctx: VerifyContext, paths: np.ndarray) -> Acceptance:
        """Judge + path walk in one ``torch.ops.autojudge.accept`` call (CUDA kernel or C++ host core);
        ``paths`` [1, P, D+1]. A lookahead judge gets the tree's greedy children."""
        from ..ops.torch_ops import accept

        device = ctx.target_logits.device
        as_tensor = lambda a: torch.as_tensor(np.ascontiguousarray(a), device=device)  # noqa: E731
        draft_tokens = as_tensor(ctx.draft_tokens.astype(np.int32))  # [1, N]
        greedy_child = as_tensor(ctx.tree.greedy_child.astype(np.int32)[None]) if self.lookahead else None  # [1, N+1]
        out = accept(ctx.target_logits, ctx.target_hidden, draft_tokens,
                     torch.full((1,), ctx.tree.num_nodes, dtype=torch.int32, device=device), as_tensor(paths),
                     self.threshold, torch.as_tensor(self.w, device=device), self.c,
                     ctx.draft_hidden if self.needs_draft_hidden else None, self.head.setup, greedy_child,
                     self.min_run)
        return Acceptance(*(t.cpu().numpy() for t in (out.accepted_lens, out.best_path, out.accepted_tokens,
                                                       out.judged_count)))


class TopKRule:
    needs_draft_hidden = False

    def __init__(self, k: int):
        self.k = int(k)

    def __call__(self, ctx: VerifyContext) -> np.ndarray:
        return topk_relaxed(ctx.logits_np(), ctx.draft_tokens, ctx.parents, self.k)


class TypicalRule:
    needs_draft_hidden = False

    def __init__(self, posterior_threshold: float = 0.09, alpha: float = 0.3):
        self.posterior_threshold, self.alpha = float(posterior_threshold), float(alpha)

    def __call__(self, ctx: VerifyContext) -> np.ndarray:
        return typical_relaxed(ctx.logits_np(), ctx.draft_tokens, ctx.parents, self.posterior_threshold, self.alpha)


class MTPRelaxedRule:
    needs_draft_hidden = False

    def __init__(self, relaxed_topk: int = 4, relaxed_delta: float = 0.1):
        self.relaxed_topk, self.relaxed_delta = int(relaxed_topk), float(relaxed_delta)

    def __call__(self, ctx: VerifyContext) -> np.ndarray:
        return mtp_relaxed(ctx.logits_np(), ctx.draft_tokens, ctx.parents, self.relaxed_topk, self.relaxed_delta)


class OracleRule:
    """Accept exactly the mismatches that mining labelled unimportant (an upper bound).

    ``unimportant`` maps a prefix (all tokens before the swapped position) to the draft tokens
    that mining found harmless right after it.
    """

    needs_draft_hidden = False

    def __init__(self, unimportant: Mapping[tuple[int, ...], set[int]]):
        self.unimportant = unimportant

    def __call__(self, ctx: VerifyContext) -> np.ndarray:
        N = ctx.tree.num_nodes
        relaxed = np.zeros((1, N + 1), bool)
        for n in range(1, N + 1):
            key = tuple(ctx.prefix) + tuple(int(ctx.draft_tokens[0, m - 1]) for m in ctx.tree.path_to(n)[:-1])
            relaxed[0, n] = int(ctx.draft_tokens[0, n - 1]) in self.unimportant.get(key, ())
        return relaxed

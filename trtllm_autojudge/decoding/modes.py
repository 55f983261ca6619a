"""Acceptance modes for the speculative loop: each builds the ``relaxed`` mask of one cycle.

``lossless`` is no rule at all (``make_rule("lossless") is None``): only exact matches are
accepted, so the output equals greedy decoding of the target token for token.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Mapping, Protocol

import numpy as np
import torch

from ..judge.head import JudgeHead
from ..judge.lookahead import node_lookahead
from .acceptance import Acceptance
from .rules import check_threshold, judge_relaxed, mtp_relaxed, topk_relaxed, typical_relaxed
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

    def logits_np(self) -> np.ndarray:  # [1, N+1, V] float32
        return self.target_logits.float().cpu().numpy()[None]

    @cached_property
    def target_argmax(self) -> np.ndarray:  # [N+1] int64: the target's greedy child of each node
        return self.target_logits.argmax(-1).cpu().numpy()

    def mismatches(self) -> np.ndarray:  # [M] int64: the nodes whose draft token is not that greedy child
        """The nodes a relaxed rule decides: every other node is an exact match (accepted by the walk)."""
        return 1 + np.flatnonzero(self.draft_tokens[0] != self.target_argmax[self.parents[0, 1:]])


class RelaxedRule(Protocol):
    needs_draft_hidden: bool

    def __call__(self, ctx: VerifyContext) -> np.ndarray:  # [1, N+1] bool
        ...


class JudgeRule:
    """AutoJudge: accept a mismatch when the judge's logit is below logit(threshold)."""

    def __init__(self, head: JudgeHead, threshold: float | None = None):
        if not head.usable_while_decoding:
            raise ValueError(f"judge setup {head.setup} needs target-token blocks (TD/TT), which do not exist "
                             f"while decoding: train with setup DT or DD-DT")
        self.head = head
        self.threshold = head.threshold if threshold is None else float(threshold)
        check_threshold(self.threshold, 1)  # here, not per cycle: a cycle without a mismatch never reaches judge_relaxed
        self.needs_draft_hidden = head.needs_draft_hidden
        self.lookahead = head.lookahead  # draft tokens a node needs after it for a verdict
        self.w, self.c = head.folded()

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

    def __call__(self, ctx: VerifyContext) -> np.ndarray:
        nodes = ctx.mismatches()  # the only nodes whose verdict the walk reads
        if len(nodes) == 0:
            return np.zeros((1, ctx.tree.num_nodes + 1), bool)
        return judge_relaxed(self.judge_logits(ctx, nodes), self.threshold)

    @property
    def fusable(self) -> bool:
        """Whether ``torch.ops.autojudge.accept`` implements this judge (setups DT and DD-DT)."""
        return self.head.setup in ("DT", "DD-DT")

    def accept_fused(self, ctx: VerifyContext, paths: np.ndarray) -> Acceptance:
        """Judge + path walk in one ``torch.ops.autojudge.accept`` call (CUDA kernel or C++ host core)."""
        from ..ops.torch_ops import accept

        device = ctx.target_logits.device
        as_tensor = lambda a: torch.as_tensor(np.ascontiguousarray(a), device=device)  # noqa: E731
        draft_tokens = as_tensor(ctx.draft_tokens.astype(np.int32))  # [1, N]
        out = accept(ctx.target_logits, ctx.target_hidden, draft_tokens,
                     torch.full((1,), ctx.tree.num_nodes, dtype=torch.int32, device=device), as_tensor(paths),
                     self.threshold, torch.as_tensor(self.w, device=device), self.c,
                     ctx.draft_hidden if self.needs_draft_hidden else None)
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

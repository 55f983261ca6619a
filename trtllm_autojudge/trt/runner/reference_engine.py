"""What the AutoJudge engines compute, written with the reference runtime (any device, no TensorRT).

:class:`ReferenceTargetEngine` takes exactly the inputs of the AutoJudge target engine
(:class:`.packing.PackedCycle`) and returns exactly its outputs: it runs every context row through
the target, gathers the final-norm hidden state and logits at ``node_rows``, scores the judge
(:func:`node_judge_logits`, any setup the plugin computes) and applies
:func:`trtllm_autojudge.spec.acceptance.accept_tree`. :class:`ReferenceDraftEngine`
returns what the draft engine returns through the executor: greedy tokens, generation logits and
the hidden-state rows of the additional output of a draft engine built for the blocks DD and DD1
(:mod:`.draft_spec`).
:class:`ReferenceStockTarget` is the stock route's target engine inside the executor's draft-target
flow: one packed step, the logits-mode rewrite, the runtime's exact-match acceptance.
:class:`ReferenceDrafter` is the engine path's drafter (:class:`.chain_drafter.ChainTreeDrafter`)
on it. Together they are the CPU specification of the engine path: the tests compare them with the
reference speculative loop, and on a GPU host the engines' outputs can be compared with them on
the same inputs.
"""
from __future__ import annotations

import numpy as np
import torch

from ...decoding.rules import exact_runs, judge_relaxed, within_min_run
from ...decoding.tree import DraftTree
from ...judge.head import JudgeHead
from ...judge.lookahead import node_lookahead
from ...models.protocol import LanguageModel
from ...spec import packed_step
from ...spec.acceptance import Acceptance, accept_tree
from ..engine.routes import check_route_judge
from .chain_drafter import ChainTreeDrafter, DraftOutput
from .packing import PackedCycle


def forward_rows(lm: LanguageModel, input_ids: np.ndarray, context_lengths: np.ndarray
                 ) -> tuple[torch.Tensor, torch.Tensor]:
    """Run each context row on its own (no KV cache across rows), as the context-only engine does.

    Returns logits [T, V] and final-norm hidden states [T, H] of the packed tokens.
    """
    logits, hidden, start = [], [], 0
    for length in context_lengths.tolist():
        out = lm.session().forward(input_ids[start : start + length].tolist())
        logits.append(out.logits)
        hidden.append(out.hidden)
        start += length
    return torch.cat(logits), torch.cat(hidden)


def node_judge_logits(
    head: JudgeHead,
    node_tokens: np.ndarray,  # [N] int: token of node n at index n-1
    greedy_child: np.ndarray | None,  # [N+1] int: rank-0 child of each node, -1 none (read by lookahead judges)
    n_valid: int,  # nodes 1..n_valid were drafted
    logits: torch.Tensor,  # [N+1, V]: the target's logits with node n as the last input token
    hidden: torch.Tensor,  # [N+1, Ht]: its final-norm hidden states there
    draft_hidden: torch.Tensor | None,  # [N+1, Hd]: the draft's (blocks DD, DD1)
) -> np.ndarray:  # [N+1] float64
    """The judge logit of nodes 1..n_valid of one sequence as the plugin scores them, +inf at the root,
    past n_valid and at a node without a verdict: each block with the node's token as the input, the
    lookahead blocks from the rows of its greedy child and grandchild, where a greedy child past
    n_valid counts as none (plugins/README.md, accept mode). The blocks are the Python rule's
    (:func:`trtllm_autojudge.judge.lookahead.node_lookahead`), in float32 as
    :class:`trtllm_autojudge.decoding.modes.JudgeRule` takes them; the dot product in float64."""
    out = np.full(len(node_tokens) + 1, np.inf)
    nodes = np.arange(1, n_valid + 1)  # [M]
    if n_valid == 0:
        return out
    rows = torch.as_tensor(nodes)
    blocks = {"DT": hidden[rows], "DD": None if draft_hidden is None else draft_hidden[rows]}
    has_verdict = np.ones(n_valid, bool)  # [M]
    if head.lookahead:
        child = np.asarray(greedy_child, np.int64)
        child = np.where((child >= 1) & (child <= n_valid), child, -1)  # [N+1]
        more, has_verdict = node_lookahead(head.blocks, child, node_tokens, nodes, logits, hidden, draft_hidden)
        blocks.update(more)
    x = torch.cat([blocks[b].float() for b in head.blocks], dim=-1).double().cpu().numpy()  # [M, F]
    w, c = head.folded()
    out[nodes] = np.where(has_verdict, x @ w.astype(np.float64) + c, np.inf)
    return out


class ReferenceTargetEngine:
    """The AutoJudge target engine (accept mode) on the reference runtime."""

    def __init__(self, target: LanguageModel, head: JudgeHead):
        check_route_judge("context", head)  # this engine computes what the plugin does
        head.check_models(target_hidden=target.hidden_size)
        self.target, self.head = target, head
        self.needs_draft_hidden = head.needs_draft_hidden
        self.needs_greedy_child = head.lookahead > 0

    @torch.inference_mode()
    def verify(self, cycle: PackedCycle) -> Acceptance:
        B, N = cycle.draft_tokens.shape
        self.check_cycle(cycle)
        logits, hidden = forward_rows(self.target, cycle.input_ids, cycle.context_lengths)
        rows = torch.as_tensor(cycle.node_rows, dtype=torch.long)
        return self.accept_nodes(cycle, logits[rows].view(B, N + 1, -1), hidden[rows].view(B, N + 1, -1))

    def check_cycle(self, cycle: PackedCycle) -> None:
        """Refuse a cycle without the inputs this judge reads."""
        for needed, given, what in ((self.needs_draft_hidden, cycle.draft_hidden, "the draft's hidden states"),
                                    (self.needs_greedy_child, cycle.greedy_child, "the greedy children")):
            if needed and given is None:
                raise ValueError(f"judge setup {self.head.setup} needs {what} in the cycle")

    def accept_nodes(self, cycle: PackedCycle, node_logits: torch.Tensor, node_hidden: torch.Tensor) -> Acceptance:
        """The plugin's decision from the target's rows at each node: ``node_logits`` [B, N+1, V] and
        ``node_hidden`` [B, N+1, Ht] (row n: node n as the last input token; the root's row at an
        invalid node)."""
        B, N = cycle.draft_tokens.shape
        draft_hidden = (torch.as_tensor(cycle.draft_hidden).view(B, N + 1, -1)  # [B, N+1, Hd]
                        if self.needs_draft_hidden else [None] * B)
        greedy_child = cycle.greedy_child if self.needs_greedy_child else [None] * B  # [B, N+1]
        judge_logit = np.stack([  # [B, N+1]
            node_judge_logits(self.head, cycle.draft_tokens[b], greedy_child[b], int(np.clip(cycle.draft_lens[b], 0, N)),
                              node_logits[b], node_hidden[b], draft_hidden[b])
            for b in range(B)])
        target_argmax = node_logits.argmax(-1).cpu().numpy()  # [B, N+1]
        relaxed = within_min_run(judge_relaxed(judge_logit, cycle.threshold.astype(np.float64)), cycle.draft_tokens,
                                 target_argmax, cycle.paths, cycle.draft_lens, self.head.min_run)  # the plugin's min_run
        return accept_tree(cycle.draft_tokens, target_argmax, cycle.paths, relaxed, cycle.draft_lens)


class ReferenceDraftEngine:
    """The draft engine as the executor returns it (:class:`.chain_drafter.DraftEngine`), on the
    reference runtime: greedy decoding with a KV cache, stopping after ``end_id`` (-1: never)."""

    def __init__(self, draft: LanguageModel, end_id: int = -1, returns_hidden: bool = True):
        self.draft, self.end_id, self.returns_hidden = draft, end_id, returns_hidden
        self.vocab_size = draft.vocab_size

    @torch.inference_mode()
    def generate(self, prompts, max_new_tokens: int, *, logits: bool, hidden: bool) -> list[DraftOutput]:
        if hidden and not self.returns_hidden:
            raise ValueError("this draft engine has no hidden-state output")
        outs = []
        for prompt in prompts:
            session = self.draft.session()
            step = session.forward(list(prompt))
            tokens = []
            logit_rows = np.zeros((max_new_tokens, self.vocab_size))  # [max_new_tokens, V]
            hidden_rows = np.zeros((max_new_tokens, self.draft.hidden_size))  # [max_new_tokens, Hd]
            for k in range(max_new_tokens):
                # row k: the step whose last input is the prompt's last token (k = 0) or generated token k
                logit_rows[k] = step.logits[-1].double().cpu().numpy()
                hidden_rows[k] = step.hidden[-1].double().cpu().numpy()
                tokens.append(int(torch.topk(step.logits[-1], 1).indices[0]))
                if tokens[-1] == self.end_id or k + 1 == max_new_tokens:
                    break
                step = session.forward([tokens[-1]])
            outs.append(DraftOutput(tokens, logit_rows if logits else None, hidden_rows if hidden else None))
        return outs


class ReferenceDrafter(ChainTreeDrafter):
    """The engine path's drafter on :class:`ReferenceDraftEngine`."""

    def __init__(self, draft: LanguageModel, end_id: int = -1):
        super().__init__(ReferenceDraftEngine(draft, end_id))


class ReferenceStockTarget:
    """The stock route's target (:mod:`trtllm_autojudge.trt.engine.stock_spec`) as the executor runs
    it for one cycle of fresh draft-target requests, on the reference runtime.

    The cycle is one packed step of context requests, ``prefix + drafts`` each, laid out as
    TensorRT-LLM lays a last context chunk out (``host_context_lengths = len(prefix) + K``, rows at
    the last 1 + K tokens). The logits and the LM head's input rows are gathered at
    ``last_token_ids``; each request's rows are a chain (its root, then its drafts), scored as the
    plugin's logits mode scores them (:func:`node_judge_logits`; a target-only judge, lookahead
    blocks from the next draft rows); the plugin's rule rewrites the logits
    (:func:`.packed_step.rewrite_logits`), and the runtime's exact-match acceptance reads the
    rewritten argmax.
    """

    def __init__(self, target: LanguageModel, head: JudgeHead, threshold: float | None = None):
        check_route_judge("stock", head)
        head.check_models(target_hidden=target.hidden_size)
        self.target, self.head = target, head
        self.threshold = head.threshold if threshold is None else float(threshold)

    @torch.inference_mode()
    def verify(self, prefixes: list[list[int]], drafts: list[list[int]]) -> list[list[int]]:
        input_ids, lengths, last_token_ids = [], [], []
        for prefix, draft in zip(prefixes, drafts):
            input_ids += [int(t) for t in prefix] + [int(t) for t in draft]
            lengths.append(len(prefix) + len(draft))
            last_token_ids += [len(input_ids) - len(draft) + j for j in range(len(draft) + 1)]
        input_ids, lengths = np.asarray(input_ids, np.int32), np.asarray(lengths, np.int32)
        rows = np.asarray(last_token_ids, np.int32)
        logits, hidden = forward_rows(self.target, input_ids, lengths)  # [T, V], [T, Ht]
        gathered = torch.as_tensor(rows - 1, dtype=torch.long)
        row_logits, row_hidden = logits[gathered], hidden[gathered]  # [L, V], [L, Ht]: the LM head's output, input
        roots = np.cumsum([0] + [len(d) + 1 for d in drafts])[:-1]  # [S]: each request's first row
        judge_logit = np.concatenate([  # [L]: per request its root row, then one row per draft
            node_judge_logits(self.head, np.asarray(draft, np.int64), DraftTree.chain(len(draft)).greedy_child,
                              len(draft), row_logits[root:root + len(draft) + 1],
                              row_hidden[root:root + len(draft) + 1], None)
            for root, draft in zip(roots, drafts)])
        row_logits = row_logits.float().cpu().numpy()
        if self.head.min_run > 1:  # the plugin's min_run: a draft row whose exact run is shorter is never judged
            argmax = row_logits.argmax(-1)  # [L]
            for root, draft in zip(roots, drafts):
                n = len(draft)
                runs = exact_runs(np.asarray([draft], np.int64), argmax[None, root:root + n + 1],
                                  DraftTree.chain(n).paths[None])[0]  # [n+1]
                judge_logit[root + 1:root + n + 1][runs[1:] < self.head.min_run] = np.inf
        request_types = np.full(len(prefixes), packed_step.CONTEXT_REQUEST, np.int32)
        rewritten = packed_step.rewrite_logits(row_logits, row_logits.argmax(-1), judge_logit, input_ids, rows,
                                               request_types, lengths, self.threshold)
        decided = rewritten.argmax(-1)  # what the stock greedy decoder reads
        out = []
        for root, draft in zip(roots, drafts):
            accepted = 0
            while accepted < len(draft) and draft[accepted] == decided[root + accepted]:
                accepted += 1
            out.append([int(t) for t in draft[:accepted]] + [int(decided[root + accepted])])
        return out


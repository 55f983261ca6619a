"""The model drafter: a second language model drafts static trees level by level (greedy: node n
takes its parent's ``ranks[n]``-th most likely token).

KV cache: the draft session has consumed ``tokens[:cached_len]``; the rest (at least the root) is
fed at the start of the next proposal. The draft consumes every level but the last while drafting
(it needs their logits); the last level's hidden states, which only a DD judge's verdict on a
last-level node needs, are computed by :func:`feed_last_level` when the acceptance walk may consult
such a node. After a cycle the draft keeps the cache entries of the accepted nodes it consumed.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch

from ..models.protocol import LanguageModel, ModelSession
from .drafter import Proposal, TreeSpec
from .tree import DraftTree, attention_mask


@dataclass
class ModelProposal(Proposal):
    """A model drafter's proposal, with the draft state it left behind."""

    slots: dict[int, int] = field(default_factory=dict)  # cache slot of every node the draft consumed
    hidden: dict[int, torch.Tensor] = field(default_factory=dict)  # node -> [Hd]: draft hidden state, node as input
    visible: int = 0  # draft cache entries up to the root (what every node sees besides its path)
    root_pos: int = 0  # position of the root token

    def draft_hidden(self, num_nodes: int) -> torch.Tensor:
        """[N+1, Hd]: row n is node n's hidden state; NaN for a node not consumed (never accepted)."""
        rows = torch.full((num_nodes + 1, self.hidden[0].shape[-1]), float("nan"), dtype=self.hidden[0].dtype)
        for n, h in self.hidden.items():
            rows[n] = h
        return rows


def _feed_level(session: ModelSession, tree: DraftTree, prop: ModelProposal, level: list[int]):
    """One draft forward over the nodes of one level; records their cache slots and hidden states."""
    base = session.cached_len
    if tree.is_chain:
        out = session.forward([int(prop.node_tokens[level[0] - 1])])
    else:
        attend = [[prop.slots[a] for a in tree.path_to(n)[:-1]] + [base + i] for i, n in enumerate(level)]
        out = session.forward(
            [int(prop.node_tokens[n - 1]) for n in level],
            positions=[prop.root_pos + int(tree.depths[n]) for n in level],
            mask=attention_mask(prop.visible, base, attend),
        )
    prop.forwards += 1
    for i, n in enumerate(level):
        prop.slots[n], prop.hidden[n] = base + i, out.hidden[i]
    return out


def propose(session: ModelSession, tokens: list[int], tree: DraftTree) -> ModelProposal:
    """Draft the tree after ``tokens`` greedily (node n takes its parent's ranks[n]-th token).

    The last level is drafted but not consumed: see :func:`feed_last_level`.
    """
    out = session.forward(tokens[session.cached_len :])
    prop = ModelProposal(tree, np.zeros(tree.num_nodes, np.int64), 1, {}, {0: out.hidden[-1]}, session.cached_len,
                         len(tokens) - 1)
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


def feed_last_level(session: ModelSession, tree: DraftTree, prop: ModelProposal) -> None:
    """Consume the last level, so that :meth:`ModelProposal.draft_hidden` has every row."""
    _feed_level(session, tree, prop, tree.levels[-1])


class ModelDraftSession:
    def __init__(self, session: ModelSession):
        self.session = session

    def propose(self, tokens: list[int], tree: TreeSpec) -> ModelProposal:
        if not isinstance(tree, DraftTree):
            raise ValueError(f"a draft model drafts static trees (DraftTree); {type(tree).__name__} is chosen by an "
                             f"EAGLE drafter's scores: use EagleDrafter, or a DraftTree")
        return propose(self.session, tokens, tree)

    def feed_last_level(self, proposal: ModelProposal) -> None:
        feed_last_level(self.session, proposal.tree, proposal)

    def commit(self, tokens: list[int], proposal: ModelProposal, nodes: list[int], consumed_hidden) -> None:
        kept = nodes[: next((i for i, n in enumerate(nodes) if n not in proposal.slots), len(nodes))]
        self.session.retain(len(tokens) - len(nodes) - 1, [proposal.slots[n] for n in kept])


class ModelDrafter:
    """A draft language model as a :class:`.drafter.Drafter`."""

    has_draft_hidden = True
    reads_target_hidden = False

    def __init__(self, draft: LanguageModel):
        self.draft = draft
        self.vocab_size = draft.vocab_size
        self.name = f"draft model {getattr(draft, 'name', type(draft).__name__)}"

    def start(self) -> ModelDraftSession:
        return ModelDraftSession(self.draft.session())

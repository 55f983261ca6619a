"""The EAGLE drafter: an EAGLE-1/2 head (:mod:`..models.eagle_head`) drafts from the target's own
final-norm hidden states, static trees (EAGLE-1, ``eagle_choices``) or dynamic trees (EAGLE-2,
:mod:`.dynamic_tree`).

The head's cache holds one pair per consumed position i: (the target's hidden state h_i, the token
x_{i+1}), at position i. A cycle's proposal first feeds the pairs the last cycle made known (the
target's states of the tokens it consumed, each paired with the token after it; the last pair's
token is the root), whose last feature drafts the root's children. Each deeper level feeds the
nodes that get children as pairs (the parent's feature, the node's token) at position
``root_pos + depth - 1``, each seeing the context pairs and its ancestors; those tree entries are
dropped at commit. Before the target has read the prompt there is nothing to draft from: the first
proposal is the empty tree, whose cycle is the target's prefill (TensorRT-LLM's EAGLE engine: the
context step emits the first token, then the EagleNets draft after it). D forwards a cycle for a
tree of depth D (one context forward, D - 1 level forwards), as TensorRT-LLM's D EagleNets.
"""
from __future__ import annotations

import numpy as np
import torch

from ..models.eagle_head import EagleHead, head_differences
from ..models.transformers_backend import TransformersLM, weights_fingerprint
from .drafter import Proposal, TreeSpec
from .dynamic_tree import Candidates, DynamicTree, top_tokens
from .tree import DraftTree, attention_mask


class EagleDraftSession:
    def __init__(self, drafter: "EagleDrafter"):
        self.drafter = drafter
        self.head = drafter.head.session()
        self.pending: torch.Tensor | None = None  # [C, H]: target states of positions whose pairs are not fed
        self.context = 0  # head cache entries that are context pairs

    @torch.inference_mode()
    def propose(self, tokens: list[int], tree: TreeSpec) -> Proposal:
        if self.pending is None:  # the target has not read the prompt yet
            return Proposal(DraftTree.chain(0), np.zeros(0, np.int64), 0)
        root_pos, C = len(tokens) - 1, len(self.pending)
        features = self.head.forward(tokens[root_pos - C + 1 :], self.pending, range(root_pos - C, root_pos))  # [C, H]
        self.pending, self.context = None, self.head.cached_len
        if isinstance(tree, DraftTree):
            return self._static(tree, features[-1], root_pos)
        return self._dynamic(tree, features[-1], root_pos)

    def _logits(self, features: torch.Tensor) -> torch.Tensor:  # [T, H] -> [T, V] float32
        lm_head = self.drafter.lm_head
        return lm_head(features.to(lm_head.weight.dtype)).float()

    def _feed(self, tokens: list[int], parent_features: torch.Tensor, depths: list[int], ancestor_slots: list[list[int]],
              root_pos: int) -> torch.Tensor:
        """One level: pairs (parent feature [T, H], token [T]) at ``root_pos + depth - 1``, each seeing the
        context and its ancestors' entries; returns their features [T, H]."""
        base = self.head.cached_len
        attend = [slots + [base + i] for i, slots in enumerate(ancestor_slots)]
        return self.head.forward(tokens, parent_features, [root_pos + d - 1 for d in depths],
                                 attention_mask(self.context, base, attend))

    def _static(self, tree: DraftTree, root_feature: torch.Tensor, root_pos: int) -> Proposal:
        prop = Proposal(tree, np.zeros(tree.num_nodes, np.int64), 1)
        features, logits, slots = {0: root_feature}, {0: self._logits(root_feature[None])[0]}, {}
        has_children = set(tree.parents[1:])
        for level in tree.levels:
            for m in sorted({tree.parents[n] for n in level}):
                top = top_tokens(logits[m], max(tree.ranks[n] for n in level if tree.parents[n] == m) + 1)
                for n in level:
                    if tree.parents[n] == m:
                        prop.node_tokens[n - 1] = int(top[tree.ranks[n]])
            expand = [n for n in level if n in has_children]
            if not expand:
                continue
            base = self.head.cached_len
            out = self._feed([int(prop.node_tokens[n - 1]) for n in expand],
                             torch.stack([features[tree.parents[n]] for n in expand]),
                             [int(tree.depths[n]) for n in expand],
                             [[slots[a] for a in tree.path_to(n)[:-1]] for n in expand], root_pos)
            prop.forwards += 1
            step_logits = self._logits(out)
            for i, n in enumerate(expand):
                slots[n], features[n], logits[n] = base + i, out[i], step_logits[i]
        return prop

    def _dynamic(self, spec: DynamicTree, root_feature: torch.Tensor, root_pos: int) -> Proposal:
        K = spec.top_k
        cands = Candidates([], [], [], [], [])
        root_log_probs = torch.log_softmax(self._logits(root_feature[None])[0].double(), -1)
        expand = cands.add_children(-1, 0.0, 1, root_log_probs, K)
        features, slots, forwards = {}, {}, 1
        for depth in range(2, spec.depth + 1):
            base = self.head.cached_len
            ancestors = []
            for c in expand:
                chain, a = [], cands.parent[c]
                while a >= 0:
                    chain.append(slots[a])
                    a = cands.parent[a]
                ancestors.append(chain[::-1])
            out = self._feed([cands.token[c] for c in expand],
                             torch.stack([root_feature if cands.parent[c] < 0 else features[cands.parent[c]]
                                          for c in expand]),
                             [cands.depth[c] for c in expand], ancestors, root_pos)
            forwards += 1
            log_probs = torch.log_softmax(self._logits(out).double(), -1)  # [K, V]
            layer = []
            for i, c in enumerate(expand):
                slots[c], features[c] = base + i, out[i]
                layer += cands.add_children(c, cands.score[c], depth, log_probs[i], K)
            expand = cands.best(layer, K)
        tree, node_tokens = cands.tree(spec.num_nodes)
        return Proposal(tree, node_tokens, forwards)

    def feed_last_level(self, proposal: Proposal) -> None:
        raise ValueError("an EAGLE drafter has no draft hidden states to feed (target-only judges only)")

    def commit(self, tokens: list[int], proposal: Proposal, nodes: list[int], consumed_hidden: torch.Tensor) -> None:
        self.head.retain(self.context)  # the tree entries go; the context pairs stay
        self.pending = consumed_hidden


class EagleDrafter:
    """An EAGLE head drafting for a transformers target (it reads the target's LM head)."""

    has_draft_hidden = False
    reads_target_hidden = True
    hidden_size = None  # no draft hidden states: a judge checked against this drafter reads the target only

    def __init__(self, target: TransformersLM, head: EagleHead, tokenizer_fingerprint: str | None = None):
        problems = head_differences(head.config, head.meta, target.hidden_size, target.vocab_size, tokenizer_fingerprint)
        if problems:
            raise ValueError("this EAGLE head does not fit the target: " + "; ".join(problems))
        self.head, self.lm_head = head, target.model.lm_head
        self.vocab_size = target.vocab_size
        self.name = f"EAGLE head ({head.config.num_layers} layer{'s' * (head.config.num_layers > 1)})"
        self.trained_depth = head.trained_depth  # the chain a verb drafts when --k is not given

    def fingerprint(self) -> str:
        """16 hex digits of SHA-256 over the head's weights as they compute (its LM head is the target's,
        in the target's fingerprint): what a certificate records of the drafter (``pair_fingerprint``)."""
        return weights_fingerprint(self.head.state_dict().items())

    def start(self) -> EagleDraftSession:
        return EagleDraftSession(self)

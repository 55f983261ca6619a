"""Drafting as one interface: a :class:`Drafter` proposes each cycle's tree of draft tokens.

A drafter makes one :class:`DraftSession` per sequence. Each cycle of the speculative loop
(:func:`.speculative.speculative_generate`) asks the session for a :class:`Proposal` (the tree it
drafted and its node tokens), verifies it, and then hands the session the outcome
(:meth:`DraftSession.commit`): the accepted nodes and, for a drafter that reads the target
(:attr:`Drafter.reads_target_hidden`), the target's final-norm hidden states of every token the
target consumed in that cycle. Two drafters:

- :class:`.model_drafter.ModelDrafter`: a second language model (the draft), static trees; its own
  hidden states with each node as input are what a DD judge reads;
- :class:`.eagle_drafter.EagleDrafter`: an EAGLE-1/2 head (:mod:`..models.eagle_head`) over the
  target's hidden states, static trees and EAGLE-2 dynamic trees (:mod:`.dynamic_tree`); it has no
  draft model, so only target-only judges run with it.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import numpy as np
import torch

from .dynamic_tree import DynamicTree
from .tree import DraftTree

TreeSpec = DraftTree | DynamicTree  # a static tree, or the rule a dynamic tree is chosen by


@dataclass
class Proposal:
    """One cycle's draft: the tree drafted (a static tree as given, or the dynamic tree chosen) and
    the token of every node."""

    tree: DraftTree
    node_tokens: np.ndarray  # [N] int64: token of node n at index n-1
    forwards: int  # draft forward passes spent

    def draft_hidden(self, num_nodes: int) -> torch.Tensor | None:
        """[N+1, Hd] the drafter's hidden state with each node as input (NaN where not computed), or
        None for a drafter without one (see :attr:`Drafter.has_draft_hidden`)."""
        return None


class DraftSession(Protocol):
    """A drafter's state for one sequence."""

    def propose(self, tokens: list[int], tree: TreeSpec) -> Proposal:
        """Draft after ``tokens`` (prompt + output; the root is ``tokens[-1]``)."""
        ...

    def feed_last_level(self, proposal: Proposal) -> None:
        """Compute the draft hidden states of the deepest level (drafters with them only)."""
        ...

    def commit(self, tokens: list[int], proposal: Proposal, nodes: list[int],
               consumed_hidden: torch.Tensor | None) -> None:
        """After the cycle: ``tokens`` is the sequence with the cycle's tokens appended, ``nodes`` the
        accepted nodes of the best path, and ``consumed_hidden [C, Ht]`` (drafters that read the target)
        the target's hidden states of the C tokens before the new root, ``tokens[-1 - C : -1]``."""
        ...


@runtime_checkable
class Drafter(Protocol):
    vocab_size: int
    has_draft_hidden: bool  # proposals carry the drafter's hidden states (what DD / DD1 judge blocks read)
    reads_target_hidden: bool  # commit needs the target's hidden states
    name: str  # how errors name it

    def start(self) -> DraftSession:
        """A session for one new sequence."""
        ...

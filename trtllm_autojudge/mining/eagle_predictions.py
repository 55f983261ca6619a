"""The draft side of label mining (:mod:`.miner`'s ``Predict`` requests) for either kind of drafter.

A draft model's teacher-forced predictions come from :class:`.cached_lm.CachedLM`. An EAGLE head
(:class:`..decoding.eagle_drafter.EagleDrafter`) has no model of its own: its teacher-forced
prediction after ``seq[: j + 1]`` is its depth-1 draft there, from the pair (the target's final-norm
state of ``seq[j - 1]``, the token ``seq[j]``) at position j - 1 seeing the pairs before it, as
the drafter's cycle rooted at ``seq[j]`` drafts it (:class:`EaglePredictions`).
"""
from __future__ import annotations

from typing import Sequence

import torch

from ..decoding.eagle_drafter import EagleDrafter
from ..models.protocol import LanguageModel
from .cached_lm import CachedLM

NO_DRAFT = -1  # entry 0 of an EAGLE head's predictions: no target state precedes the first token


class EaglePredictions:
    """Teacher-forced depth-1 drafts of an EAGLE head (recomputed per sequence: the target's states,
    then one head forward over the pairs)."""

    def __init__(self, drafter: EagleDrafter, target: LanguageModel):
        self.drafter, self.target = drafter, target
        self.forwarded = 0  # pairs run through the head (the target's states are counted as draft cost too)

    @torch.inference_mode()
    def predictions(self, seq: Sequence[int]) -> list[int]:
        """Entry j: the head's draft after ``seq[: j + 1]`` (:data:`NO_DRAFT` for j = 0)."""
        seq = [int(t) for t in seq]
        if len(seq) < 2:
            return [NO_DRAFT] * len(seq)
        ids = torch.tensor([seq], device=self.target.device)
        hidden = self.target.model.model(input_ids=ids).last_hidden_state[0]  # [L, H]
        features = self.drafter.head(ids[0, 1:], hidden[:-1], torch.arange(len(seq) - 1))  # [L-1, H]: pair j-1
        lm_head = self.drafter.lm_head
        drafts = lm_head(features.to(lm_head.weight.dtype)).argmax(-1).tolist()  # [L-1]
        self.forwarded += 2 * len(seq) - 1
        return [NO_DRAFT] + drafts


def draft_predictions(draft, target: LanguageModel, reuse: bool) -> CachedLM | EaglePredictions:
    """What answers a miner's ``Predict`` requests for ``draft`` (a draft model or an EAGLE drafter)."""
    return EaglePredictions(draft, target) if isinstance(draft, EagleDrafter) else CachedLM(draft, reuse)

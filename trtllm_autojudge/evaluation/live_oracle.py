"""The live oracle: a perfect judge under a minimum run, decided along its own decoding.

The exact oracle replay (:mod:`.trajectory`) follows the mined trajectory, which accepts every
harmless swap; held to a minimum run it leaves that trajectory, so it bounds nothing there
(docs/notebook/certification.md, "The gain a minimum run leaves to any judge"). This rule decides
each mismatch the walk reaches where it stands: a mismatch that opens at least ``min_run`` tokens
(:func:`..decoding.rules.exact_runs`) is accepted exactly when the target's greedy continuation of
the state with the draft's token kept gives the reference answer (``keeps_answer``). Every earlier
acceptance kept that answer, so the continuation with the target's own token gives it too: one
continuation per mismatch asked. No judge of the same minimum run can accept a harmless mismatch
this rule rejects, so its gain is what a judge of that rule could give at no answer changed (up to
the way decoding paths then part, and to bf16 near-ties in the continuations).

Chains only: on a chain the walk reads the mismatches in order and stops at the first rejected one,
so the rule asks about no mismatch after it.

Each verdict is kept (:attr:`LiveOracleRule.verdicts`: the node, which is the mismatch's depth in the
window, the exact run its acceptance opens, and whether the swap kept the answer), with a judge's score of the same mismatch when a
``score(ctx, node)`` is given: the labels of exactly the mismatches a judge of the rule is asked
about, so its ranking of them (an AUC) can be read by depth in the window.
"""
from __future__ import annotations

from typing import Callable

import numpy as np

from ..decoding.modes import VerifyContext
from ..decoding.rules import exact_runs


class LiveOracleRule:
    """A :class:`..decoding.modes.RelaxedRule` (module docstring). ``keeps_answer(prefix)`` gets the
    prompt and the output so far with the mismatch's draft token last, and says whether the target's
    greedy continuation of it gives the reference answer. ``verdicts`` holds one dict per call
    (``node``, ``run``, ``keeps`` and, with ``score``, ``score``: None where the scorer gives no finite
    value); ``asked`` counts them."""

    needs_draft_hidden = False

    def __init__(self, keeps_answer: Callable[[list[int]], bool], min_run: int = 1,
                 score: Callable[[VerifyContext, int], float] | None = None):
        if min_run < 1:
            raise ValueError(f"min_run is a number of tokens an acceptance must open: give 1 (any) or more, got {min_run}")
        self.keeps_answer, self.min_run, self.score = keeps_answer, int(min_run), score
        self.verdicts: list[dict] = []

    @property
    def asked(self) -> int:
        return len(self.verdicts)

    def __call__(self, ctx: VerifyContext) -> np.ndarray:  # [1, N+1] bool
        if not ctx.tree.is_chain:
            raise ValueError("the live oracle decides chains only: give a chain draft (--k), not a tree")
        relaxed = np.zeros((1, ctx.tree.num_nodes + 1), bool)
        runs = exact_runs(ctx.draft_tokens, ctx.target_argmax[None], ctx.tree.paths[None])[0]  # [N+1]
        for n in ctx.mismatches():  # ascending: the order the walk meets them
            if runs[n] < self.min_run:
                break
            keeps = bool(self.keeps_answer(list(ctx.prefix) + [int(t) for t in ctx.draft_tokens[0, :n]]))
            verdict = {"node": int(n), "run": int(runs[n]), "keeps": keeps}
            if self.score is not None:
                value = float(self.score(ctx, int(n)))
                verdict["score"] = value if np.isfinite(value) else None
            self.verdicts.append(verdict)
            if not keeps:
                break
            relaxed[0, n] = True
        return relaxed

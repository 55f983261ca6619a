"""The judge's target-confidence gate: a mismatch where the target gave its own token less than
``min_target_prob`` is never judged, so it is rejected as in lossless decoding."""
import argparse

import numpy as np
import pytest
import torch

from eagle_heads import first_layer_head
from test_min_run import accept_all_judge
from test_speculative import MAX_NEW, prompts
from tiny_models import tiny_pair
from trtllm_autojudge.decoding.dynamic_tree import DynamicTree
from trtllm_autojudge.decoding.eagle_drafter import EagleDrafter
from trtllm_autojudge.decoding.modes import JudgeRule, target_token_prob
from trtllm_autojudge.decoding.rules import exact_runs
from trtllm_autojudge.decoding.speculative import speculative_generate
from trtllm_autojudge.decoding.tree import DraftTree
from trtllm_autojudge.evaluation.common import apply_rule_options
from trtllm_autojudge.judge.export import unsupported_reason
from trtllm_autojudge.trt.pytorch.backend import JudgeScorer


def test_the_target_token_probability_is_the_softmax_maximum():
    gen = torch.Generator().manual_seed(1)
    logits = torch.randn(7, 40, generator=gen, dtype=torch.float32) * 4  # [N+1, V]
    logits[2, 5:] = -torch.inf  # a masked vocabulary
    rows = np.array([0, 2, 2, 6])
    expected = torch.softmax(logits.double(), -1).max(-1).values[rows].numpy()
    assert np.allclose(target_token_prob(logits, rows), expected, rtol=1e-12)
    assert np.allclose(target_token_prob(logits.bfloat16(), rows),
                       torch.softmax(logits.bfloat16().double(), -1).max(-1).values[rows].numpy(), rtol=1e-12)


class Recording(JudgeRule):
    """Keeps, per cycle, the relaxed mask, the mismatching nodes, the target's probability of its
    own token at each node's parent, and the run each node opens through exact matches."""

    def __init__(self, head):
        super().__init__(head)
        self.cycles = []  # (relaxed [N+1], mismatches [M], p_target [M], runs [M])

    def __call__(self, ctx):
        relaxed = super().__call__(ctx)
        nodes = ctx.mismatches()
        p = torch.softmax(ctx.target_logits.double(), -1).max(-1).values.numpy()[ctx.parents[0, nodes]]
        runs = exact_runs(ctx.draft_tokens, ctx.target_argmax[None], ctx.tree.paths[None])[0, nodes]
        self.cycles.append((relaxed[0].copy(), nodes, p, runs))
        return relaxed


TREES = [DraftTree.chain(6), DraftTree.static([2, 2, 1, 1]), DynamicTree(4, 3, 10)]


@pytest.mark.parametrize("min_run", [1, 2])
@pytest.mark.parametrize("tree", TREES, ids=["chain", "tree", "eagle-dynamic"])
def test_a_gated_judge_judges_only_where_the_target_was_sure(tree, min_run):
    """An accept-everything judge relaxes every mismatch opening its minimum run; gated at the
    median target probability of its mismatches it relaxes exactly those at or above the gate that
    open the minimum run: the gate and the minimum run compose, on chains, static trees and the
    EAGLE drafter's dynamic trees."""
    target, draft = tiny_pair(seed=0)
    drafter = EagleDrafter(target, first_layer_head(target)) if isinstance(tree, DynamicTree) else draft
    run = lambda rule: [speculative_generate(target, drafter, prompt, tree=tree, rule=rule, max_new_tokens=MAX_NEW)  # noqa: E731
                        for prompt in prompts(4)]
    meta = {} if min_run == 1 else {"min_run": min_run}
    free = Recording(accept_all_judge(target, draft, **meta))
    run(free)
    assert min_run == 1 or any((runs < min_run).any() for *_, runs in free.cycles)  # the run holds some back
    seen = np.concatenate([p[runs >= min_run] for _, _, p, runs in free.cycles])  # of the judgeable mismatches
    assert len(seen) > 10 and all(np.array_equal(relaxed[nodes], runs >= min_run) for relaxed, nodes, _, runs in free.cycles)
    values = np.unique(seen)
    gate = float(values[len(values) // 2 - 1] + values[len(values) // 2]) / 2  # a median that no mismatch ties
    held = Recording(accept_all_judge(target, draft, min_target_prob=gate, **meta))
    run(held)
    kept = stopped = 0
    for relaxed, nodes, p, runs in held.cycles:
        assert np.array_equal(relaxed[nodes], (p >= gate) & (runs >= min_run))  # the gate and the run, nothing else
        long = runs >= min_run
        kept, stopped = kept + int((p[long] >= gate).sum()), stopped + int((p[long] < gate).sum())
    assert kept > 0 and stopped > 0


def test_the_gate_is_part_of_the_judge_and_runs_in_the_python_rule_only():
    """It changes the fingerprint, is set or cleared by --min-target-prob, is refused outside (0, 1)
    in a file and outside [0, 1) on the command line, and the core, plugin, vllm export and PyTorch
    backend refuse a judge that has one, saying what to change."""
    target, draft = tiny_pair(seed=0)
    head, gated = accept_all_judge(target, draft), accept_all_judge(target, draft, min_target_prob=0.9)
    assert gated.min_target_prob == 0.9 and head.min_target_prob == 0.0
    assert gated.fingerprint() != head.fingerprint() and gated.weights_fingerprint() != head.weights_fingerprint()
    assert gated.describe()["min_target_prob"] == 0.9 and "min_target_prob" not in head.describe()
    assert JudgeRule(head).fusable and not JudgeRule(gated).fusable
    for fmt in ("plugin", "vllm"):
        assert "target-confidence gate (min_target_prob 0.9)" in unsupported_reason(gated, fmt)
    assert unsupported_reason(head, "plugin") is None
    with pytest.raises(ValueError, match="target-confidence gate .*--accept-impl python"):
        JudgeScorer(gated)
    for bad in (0, 1, 1.5, True, "0.9"):
        with pytest.raises(ValueError, match="min_target_prob must be a probability in"):
            accept_all_judge(target, draft, min_target_prob=bad)
    args = lambda p: argparse.Namespace(min_run=None, veto=None, min_target_prob=p)  # noqa: E731
    assert apply_rule_options(head, args(0.8), None).min_target_prob == 0.8
    assert "min_target_prob" not in apply_rule_options(gated, args(0), None).meta
    assert apply_rule_options(gated, args(None), None).min_target_prob == 0.9
    for bad in (-0.1, 1.0):
        with pytest.raises(SystemExit, match="--min-target-prob .*give a number in \\[0, 1\\)"):
            apply_rule_options(head, args(bad), None)

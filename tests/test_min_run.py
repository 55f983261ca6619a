"""The judge's minimum run: the tokens a node opens through exact matches, and a judge that never
accepts a mismatch opening fewer than its minimum."""
import argparse

import numpy as np
import pytest

from test_speculative import MAX_NEW, prompts
from tiny_models import tiny_pair
from trtllm_autojudge.decoding.modes import JudgeRule
from trtllm_autojudge.decoding.rules import exact_runs
from trtllm_autojudge.decoding.speculative import speculative_generate
from trtllm_autojudge.decoding.tree import DraftTree
from trtllm_autojudge.evaluation.common import apply_rule_options
from trtllm_autojudge.judge.export import unsupported_reason
from trtllm_autojudge.judge.head import JudgeHead, feature_dim


def brute_runs(exact: np.ndarray, parents: np.ndarray) -> np.ndarray:  # [N+1] for one sequence
    """1 + the longest downward chain of exact matches from each node, by walking every descendant path."""
    children = {n: [c for c in range(len(parents)) if parents[c] == n] for n in range(len(parents))}

    def run(n):
        return 1 + max((run(c) for c in children[n] if exact[c]), default=0)

    return np.array([run(n) for n in range(len(parents))])


def accept_all_judge(target, draft, **meta) -> JudgeHead:
    F = feature_dim("DT", draft.hidden_size, target.hidden_size)
    return JudgeHead(np.zeros(F), np.zeros(F), np.ones(F), -100.0, "DT", draft.hidden_size, target.hidden_size, 0.5,
                     meta=meta)


class Recording(JudgeRule):
    """A JudgeRule that keeps, per cycle, its relaxed mask and the exact matches of the draft."""

    def __init__(self, head):
        super().__init__(head)
        self.cycles = []  # (relaxed [N+1], exact [N+1], parents [N+1])

    def __call__(self, ctx):
        relaxed = super().__call__(ctx)
        exact = np.ones(ctx.tree.num_nodes + 1, bool)
        exact[ctx.mismatches()] = False
        exact[0] = False
        self.cycles.append((relaxed[0].copy(), exact, ctx.parents[0].copy()))
        return relaxed


@pytest.mark.parametrize("tree", [DraftTree.chain(6), DraftTree.static([2, 2, 1, 1])], ids=["chain", "tree"])
def test_a_judge_with_a_minimum_run_accepts_only_long_runs(tree):
    """An accept-everything judge relaxes mismatches opening 1 or 2 tokens; with min_run 3 it
    relaxes none of them and keeps every one opening 3 or more."""
    target, draft = tiny_pair(seed=0)
    free, held = Recording(accept_all_judge(target, draft)), Recording(accept_all_judge(target, draft, min_run=3))
    for prompt in prompts(4):
        for rule in (free, held):
            speculative_generate(target, draft, prompt, tree=tree, rule=rule, max_new_tokens=MAX_NEW)
    short = long = 0
    for relaxed, exact, parents in free.cycles:
        runs = brute_runs(exact, parents)
        short += int((relaxed & (runs < 3)).sum())
    for relaxed, exact, parents in held.cycles:
        runs = brute_runs(exact, parents)
        assert not (relaxed & (runs < 3)).any()
        mismatch = ~exact
        mismatch[0] = False
        assert (relaxed[mismatch & (runs >= 3)]).all()  # the minimum is the only thing that holds the judge back
        long += int(relaxed.sum())
    assert short > 0 and long > 0


def test_the_minimum_run_is_part_of_the_judge():
    """It changes the fingerprint, runs in the compiled core and the plugin but not in the vllm
    export, is set (or cleared) by --min-run, and is refused below 2 in a file."""
    target, draft = tiny_pair(seed=0)
    head, held = accept_all_judge(target, draft), accept_all_judge(target, draft, min_run=4)
    assert held.min_run == 4 and head.min_run == 1
    assert held.fingerprint() != head.fingerprint() and held.weights_fingerprint() != head.weights_fingerprint()
    assert JudgeRule(head).fusable and JudgeRule(held).fusable
    assert unsupported_reason(held, "plugin") is None and unsupported_reason(head, "plugin") is None
    assert "min_run" in unsupported_reason(held, "vllm") and unsupported_reason(head, "vllm") is None
    with pytest.raises(ValueError, match="min_run must be a whole number"):
        accept_all_judge(target, draft, min_run=1)
    args = lambda m: argparse.Namespace(min_run=m, veto=None, min_target_prob=None)  # noqa: E731
    assert apply_rule_options(head, args(4), None).meta["min_run"] == 4
    assert "min_run" not in apply_rule_options(held, args(1), None).meta
    assert apply_rule_options(held, args(None), None).min_run == 4
    with pytest.raises(SystemExit, match="--min-run"):
        apply_rule_options(head, args(0), None)


@pytest.mark.parametrize("branching", [[1] * 7, [2, 2, 1, 1], [3, 1, 2]])
def test_exact_runs_match_a_walk_of_every_descendant(branching):
    """rules.exact_runs (from the path rows, as the compiled core takes them) == a recursive walk of
    each node's descendants in the tree cut after draft_lens[b], a node past it no exact match."""
    tree = DraftTree.static(branching)
    N = tree.num_nodes
    rng = np.random.default_rng(len(branching))
    B = 6
    target_argmax = rng.integers(0, 3, size=(B, N + 1))
    draft_tokens = rng.integers(0, 3, size=(B, N))
    draft_lens = np.array([N, 0, N // 2, N - 1, 1, N])
    runs = exact_runs(draft_tokens, target_argmax, tree.paths[None].repeat(B, 0), draft_lens)
    parents = np.asarray(tree.parents)
    for b in range(B):
        exact = np.zeros(N + 1, bool)
        exact[1:] = draft_tokens[b] == target_argmax[b, parents[1:]]
        exact[draft_lens[b] + 1:] = False
        assert runs[b].tolist() == brute_runs(exact, parents).tolist()
    with pytest.raises(ValueError, match=r"target_argmax must be \[B, N\+1\]"):
        exact_runs(draft_tokens, target_argmax[:, 1:], tree.paths[None].repeat(B, 0))


@pytest.mark.parametrize("tree, min_run", [(DraftTree.chain(6), 3), (DraftTree.chain(6), 5),
                                           (DraftTree.static([2, 2, 1, 1]), 3)], ids=["chain-3", "chain-5", "tree-3"])
def test_the_compiled_core_applies_the_minimum_run_as_the_rule(tree, min_run):
    """JudgeRule.accept_fused (torch.ops.autojudge.accept, the host core on CPU) with a minimum run ==
    the Python rule, token for token and judged acceptance for judged acceptance; the minimum removes
    judged acceptances the same judge makes without it."""
    target, draft = tiny_pair(seed=0)
    rng = np.random.default_rng(min_run)
    F = feature_dim("DT", draft.hidden_size, target.hidden_size)
    coef = 0.05 * rng.normal(size=F)
    free_judged = held_judged = 0
    for prompt in prompts(4):
        runs = {}
        for meta in ({}, {"min_run": min_run}):
            head = JudgeHead(coef, np.zeros(F), np.ones(F), -0.5, "DT", draft.hidden_size, target.hidden_size, 0.5,
                             meta=meta)
            ref = speculative_generate(target, draft, prompt, tree=tree, rule=JudgeRule(head), max_new_tokens=MAX_NEW)
            op = speculative_generate(target, draft, prompt, tree=tree, rule=JudgeRule(head), max_new_tokens=MAX_NEW,
                                      fused=True)
            assert op.tokens == ref.tokens
            assert [(c.accepted, c.judged) for c in op.cycles] == [(c.accepted, c.judged) for c in ref.cycles]
            runs[bool(meta)] = sum(c.judged for c in ref.cycles)
        free_judged += runs[False]
        held_judged += runs[True]
    assert free_judged > held_judged > 0, (free_judged, held_judged)

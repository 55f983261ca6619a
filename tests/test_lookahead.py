"""Lookahead judge blocks (DT1, DT2, DD1, LS): mining's features and the decoding rule's both equal
plain forwards over the swapped sequence and the draft's greedy continuation of it."""
import warnings

import numpy as np
import pytest
import torch

from test_features import plain_hidden
from test_mining import KeyTokens, decode, tiny_prompts
from tiny_models import tiny_pair
from trtllm_autojudge.decoding.modes import JudgeRule, VerifyContext
from trtllm_autojudge.decoding.rules import judge_relaxed
from trtllm_autojudge.decoding.speculative import feed_last_level, propose, verify
from trtllm_autojudge.decoding.tree import DraftTree
from trtllm_autojudge.judge.export import unsupported_reason
from trtllm_autojudge.judge.head import JudgeHead, feature_dim
from trtllm_autojudge.judge.lookahead import MIN_LOG_PROB
from trtllm_autojudge.mining.features import extract_features
from trtllm_autojudge.mining.miner import LabelMiner, MiningConfig
from trtllm_autojudge.spec.acceptance import accept_tree

SETUP = "DD-DT-DT1-DT2-DD1-LS"


def plain_logits(lm, seq):  # [V] float64
    with torch.no_grad():
        return lm.model(input_ids=torch.tensor([seq])).logits[0, -1].double().numpy()


def plain_scores(logits0, logits1, c1, c2):  # [6]: the LS block, written out independently
    scores = []
    for logits, c in ((logits0, c1), (logits1, c2)):
        logp = logits - np.logaddexp.reduce(logits)
        scores.append(max(logp[c], MIN_LOG_PROB))
    scores += [float(np.argmax(logits0) == c1), float(np.argmax(logits1) == c2)]
    for logits in (logits0, logits1):
        p = np.exp(logits - np.logaddexp.reduce(logits))
        scores.append(-np.sum(p * np.log(np.maximum(p, 1e-300))))
    return np.array(scores)


def plain_features(target, draft, prefix, d):
    """[F] of SETUP for the draft token ``d`` after ``prefix``, one plain forward per block."""
    c1 = int(np.argmax(plain_logits(draft, prefix + [d])))
    c2 = int(np.argmax(plain_logits(draft, prefix + [d, c1])))
    return np.concatenate([
        plain_hidden(draft, prefix + [d]), plain_hidden(target, prefix + [d]),
        plain_hidden(target, prefix + [d, c1]), plain_hidden(target, prefix + [d, c1, c2]),
        plain_hidden(draft, prefix + [d, c1]),
        plain_scores(plain_logits(target, prefix + [d]), plain_logits(target, prefix + [d, c1]), c1, c2)])


def test_mined_lookahead_blocks_equal_plain_forwards():
    target, draft = tiny_pair(seed=3)
    miner = LabelMiner(target, draft, KeyTokens(window=10), decode, MiningConfig(max_new_tokens=16))
    records = [miner.mine(p, record_id=pid) for pid, p, _ in tiny_prompts(3)]
    fs = extract_features(target, draft, records, SETUP, progress=False)
    H = target.hidden_size
    assert fs.features.shape == (sum(len(r["labels"]) for r in records), feature_dim(SETUP, H, H)) and fs.num_rows > 3
    row = 0
    for rec in records:
        for pos, _important, _t_tok, d_tok in rec["labels"]:
            expect = plain_features(target, draft, rec["final_ids"][:pos], d_tok)
            np.testing.assert_allclose(fs.features[row].astype(np.float32), expect, atol=2e-2, rtol=1e-2)  # float16
            row += 1


def random_head(target, draft, seed=0):
    F = feature_dim(SETUP, draft.hidden_size, target.hidden_size)
    g = np.random.default_rng(seed)
    return JudgeHead(g.normal(size=F), g.normal(size=F), g.uniform(0.5, 2, size=F), 0.3, SETUP,
                     draft.hidden_size, target.hidden_size, 0.5)


def verify_context(target, draft, tree, prompt, feed_leaves=True):
    """One cycle's context: the draft's proposal verified by the target. Without ``feed_leaves`` the
    deepest level's draft hidden rows stay NaN, as while decoding."""
    d_sess, t_sess = draft.session(), target.session()
    with torch.no_grad():
        prop = propose(d_sess, prompt, tree)
        if feed_leaves:
            feed_last_level(d_sess, tree, prop)
        logits, hidden, _ = verify(t_sess, prompt, tree, prop.node_tokens)
    return prop, VerifyContext(list(prompt), tree, prop.node_tokens[None], np.asarray(tree.parents, np.int32)[None],
                               logits, hidden, prop.draft_hidden(tree.num_nodes))


TREES = [DraftTree.chain(5), DraftTree.static([2, 2, 1, 1])]


@pytest.mark.parametrize("tree", TREES, ids=["chain", "tree"])
def test_rule_scores_nodes_as_plain_forwards_do(tree):
    target, draft = tiny_pair(seed=5)
    head = random_head(target, draft)
    rule = JudgeRule(head)
    assert rule.needs_draft_hidden and rule.fusable and head.lookahead == 2
    prompt = tiny_prompts(1, seed=4)[0][1]
    prop, ctx = verify_context(target, draft, tree, prompt)
    got = rule.judge_logits(ctx)[0]  # [N+1]
    scored = 0
    for n in range(1, tree.num_nodes + 1):
        child = tree.greedy_child[n]
        if child < 0 or tree.greedy_child[child] < 0:
            assert got[n] == np.inf  # no two draft tokens after it: no verdict, rejected
            continue
        path = [int(prop.node_tokens[m - 1]) for m in tree.path_to(n)]
        x = plain_features(target, draft, list(prompt) + path[:-1], path[-1])
        np.testing.assert_allclose(got[n], head.logits(x[None])[0], rtol=1e-3, atol=1e-3)
        scored += 1
    assert scored >= 3


@pytest.mark.parametrize("setup", [SETUP, "DD-DT", "DT-LS"])
@pytest.mark.parametrize("tree", TREES + [DraftTree.static([3, 2, 2, 1])], ids=["chain", "tree", "wide"])
def test_rule_scoring_only_mismatches_equals_scoring_every_node(tree, setup):
    """The rule scores only the mismatching nodes (the fast path); the same logits as scoring the
    whole window (the reference), on random heads and random models, with the deepest level's draft
    rows fed or NaN, and the same relaxed mask wherever the walk reads it."""
    verdicts = []
    for seed in range(3):
        target, draft = tiny_pair(seed=seed)
        F = feature_dim(setup, draft.hidden_size, target.hidden_size)
        g = np.random.default_rng(seed)
        head = JudgeHead(g.normal(size=F), g.normal(size=F), g.uniform(0.5, 2, size=F), 0.3, setup,
                         draft.hidden_size, target.hidden_size, 0.5)
        _, ctx = verify_context(target, draft, tree, tiny_prompts(1, seed=seed)[0][1], feed_leaves=seed != 1)
        every = JudgeRule(head).judge_logits(ctx)[0]  # [N+1]
        finite = np.sort(every[np.isfinite(every)])
        cut = finite[len(finite) // 2 - 1 : len(finite) // 2 + 1].mean()  # between two logits: some accepted, some not
        rule = JudgeRule(head, threshold=float(1 / (1 + np.exp(-cut))))
        for size in range(tree.num_nodes + 1):
            nodes = np.sort(g.choice(tree.num_nodes + 1, size=size, replace=False))
            some = rule.judge_logits(ctx, nodes)[0]
            np.testing.assert_allclose(some[nodes], every[nodes], rtol=1e-6, atol=1e-6)
            assert np.all(np.isinf(np.delete(some, nodes)))
        mismatch = np.zeros(tree.num_nodes + 1, bool)  # [N+1]
        mismatch[1:] = ctx.draft_tokens[0] != ctx.logits_np()[0].argmax(-1)[ctx.parents[0, 1:]]
        assert np.array_equal(ctx.mismatches(), np.flatnonzero(mismatch))
        relaxed = rule(ctx)[0]
        assert np.array_equal(relaxed, judge_relaxed(every[None], rule.threshold)[0] & mismatch)
        verdicts += list(relaxed[ctx.mismatches()])
    assert any(verdicts) and not all(verdicts)


@pytest.mark.parametrize("tree", TREES + [DraftTree.chain(2)], ids=["chain", "tree", "chain of 2"])
def test_fused_acceptance_equals_the_rule(tree):
    """JudgeRule.accept_fused (torch.ops.autojudge.accept: the host core on CPU) == the rule + accept_tree,
    with the deepest level's draft rows NaN as while decoding, at thresholds between two judge logits
    and above all of them."""
    target, draft = tiny_pair(seed=5)
    head = random_head(target, draft, seed=2)
    _, ctx = verify_context(target, draft, tree, tiny_prompts(1, seed=4)[0][1], feed_leaves=False)
    logits = JudgeRule(head).judge_logits(ctx, ctx.mismatches())[0]
    finite = np.sort(logits[np.isfinite(logits)])
    cuts = [finite[-1] + 1.0] if len(finite) else [0.0]  # every scored node judged
    if len(finite) > 1:
        cuts.append(finite[len(finite) // 2 - 1: len(finite) // 2 + 1].mean())  # some judged, some not
    paths = tree.paths[None]
    judged = 0
    for cut in cuts:
        rule = JudgeRule(head, threshold=float(1 / (1 + np.exp(-cut))))
        assert rule.fusable
        want = accept_tree(ctx.draft_tokens, ctx.target_argmax[None], paths, rule(ctx))
        with warnings.catch_warnings(record=True) as said:
            warnings.simplefilter("always")
            got = rule.accept_fused(ctx, paths)
        for name in ("accepted_len", "best_path", "judged_count", "accepted_tokens"):
            np.testing.assert_array_equal(getattr(got, name), getattr(want, name), err_msg=name)
        assert any("gives no verdict" in str(w.message) for w in said) == (tree.max_depth <= head.lookahead)
        judged += int(got.judged_count[0])
    assert judged > 0 or tree.max_depth <= head.lookahead


def test_lookahead_setups_export_for_the_plugin():
    target, draft = tiny_pair(seed=0)
    head = random_head(target, draft)
    assert unsupported_reason(head, "plugin") is None
    dt1 = JudgeHead(np.zeros(64), np.zeros(64), np.ones(64), 0.0, "DT1", 64, 64)
    assert dt1.lookahead == 1 and not dt1.needs_draft_hidden and dt1.usable_while_decoding
    assert feature_dim("DT-LS", 16, 32) == 38
    with pytest.raises(ValueError, match="threshold must lie in"):
        JudgeRule(head, threshold=1.5)

"""Speculative decoding on the tiny random pair: lossless == greedy, and the tree/cache machinery."""
import numpy as np
import pytest
import torch

from greedy_check import NEAR_TIE, greedy_gaps
from tiny_models import EOS, VOCAB, tiny_pair
from trtllm_autojudge.decoding import speculative
from trtllm_autojudge.decoding.modes import JudgeRule, TopKRule, VerifyContext
from trtllm_autojudge.decoding.rules import threshold_logit
from trtllm_autojudge.decoding.speculative import greedy_generate, leaf_may_matter, speculative_generate
from trtllm_autojudge.decoding.tree import DraftTree
from trtllm_autojudge.judge.head import JudgeHead, feature_dim
from trtllm_autojudge.spec.acceptance import accept_tree

MAX_NEW = 40


@pytest.fixture(scope="module")
def pair():
    return tiny_pair(seed=0)


def prompts(n, seed=1):
    g = torch.Generator().manual_seed(seed)
    return [torch.randint(3, VOCAB, (int(torch.randint(1, 12, (1,), generator=g)),), generator=g).tolist() for _ in range(n)]


def hf_greedy(model, prompt, max_new=MAX_NEW):
    out = model.model.generate(torch.tensor([prompt]), max_new_tokens=max_new, do_sample=False,
                               eos_token_id=EOS, pad_token_id=0)
    return out[0, len(prompt):].tolist()


TREES = [DraftTree.chain(1), DraftTree.chain(2), DraftTree.chain(5), DraftTree.chain(16),
         DraftTree.static([2, 2, 1]), DraftTree.static([3, 1, 1, 1])]


@pytest.mark.parametrize("tree", TREES, ids=lambda t: f"N{t.num_nodes}-D{t.max_depth}")
def test_lossless_equals_target_greedy(pair, tree):
    target, draft = pair
    for prompt in prompts(6):
        ref = hf_greedy(target, prompt)
        out = speculative_generate(target, draft, prompt, tree=tree, max_new_tokens=MAX_NEW)
        assert out.tokens == ref
        assert all(c.judged == 0 and c.accepted <= tree.max_depth for c in out.cycles)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["fp32", "bf16"])
@pytest.mark.parametrize("tree", TREES, ids=lambda t: f"N{t.num_nodes}-D{t.max_depth}")
def test_lossless_emits_the_targets_greedy_token_in_each_dtype(tree, dtype):
    """Every token lossless decoding emits is the target's argmax at its own prefix, in the model's
    own dtype; the only exceptions allowed are near-ties within the dtype's rounding."""
    target, draft = tiny_pair(seed=0, dtype=dtype)
    ties = 0
    for prompt in prompts(6):
        out = speculative_generate(target, draft, prompt, tree=tree, max_new_tokens=MAX_NEW)
        gaps, scale = greedy_gaps(target, prompt, out.tokens)
        assert torch.all(gaps <= NEAR_TIE[dtype] * scale), f"a non-greedy token at gap {gaps.max():.4g}"
        ties += int((gaps > 0).sum())
        assert len(out.tokens) == MAX_NEW or out.tokens[-1] == EOS
    assert ties <= 2, f"{ties} near-tie swaps in 6 runs: more than rounding explains"


def test_own_greedy_equals_hf_generate(pair):
    target, _ = pair
    for prompt in prompts(4, seed=5):
        assert greedy_generate(target, prompt, MAX_NEW) == hf_greedy(target, prompt)


def test_top1_rule_is_lossless(pair):
    target, draft = pair
    for prompt in prompts(3, seed=7):
        out = speculative_generate(target, draft, prompt, tree=DraftTree.static([2, 1]), rule=TopKRule(1),
                                   max_new_tokens=MAX_NEW)
        assert out.tokens == hf_greedy(target, prompt)


def accept_everything(setup, target, draft):
    F = feature_dim(setup, draft.hidden_size, target.hidden_size)
    return JudgeHead(np.zeros(F), np.zeros(F), np.ones(F), -100.0, setup, draft.hidden_size, target.hidden_size, 0.5)


@pytest.mark.parametrize("k", [1, 4])
def test_judge_accepting_every_mismatch_yields_the_drafts_window(pair, k):
    target, draft = pair
    for prompt in prompts(3, seed=11):
        out = speculative_generate(target, draft, prompt, tree=DraftTree.chain(k),
                                   rule=JudgeRule(accept_everything("DT", target, draft)), max_new_tokens=MAX_NEW)
        seq, pos = list(prompt), 0
        for cycle in out.cycles:
            assert cycle.accepted == k
            window = greedy_generate(draft, seq, k, stop_ids=[])
            bonus = greedy_generate(target, seq + window, 1, stop_ids=[])
            expect = (window + bonus)[: MAX_NEW - pos]
            if EOS in expect:
                expect = expect[: expect.index(EOS) + 1]
            assert out.tokens[pos : pos + len(expect)] == expect
            seq, pos = seq + expect, pos + len(expect)
        assert pos == len(out.tokens)


class Recorder:
    """A rule that accepts every mismatch and keeps what it was shown."""

    def __init__(self, needs_draft_hidden=True):
        self.needs_draft_hidden = needs_draft_hidden
        self.seen: list[VerifyContext] = []

    def __call__(self, ctx):
        self.seen.append(ctx)
        relaxed = np.ones((1, ctx.tree.num_nodes + 1), bool)
        relaxed[0, 0] = False
        return relaxed


@pytest.mark.parametrize("tree", [DraftTree.chain(3), DraftTree.static([2, 2]), DraftTree.static([3, 1, 2])],
                         ids=lambda t: f"N{t.num_nodes}")
def test_tree_logits_and_hidden_states_equal_plain_forwards(pair, tree):
    """Every node's logits/hidden (target and draft) equal a fresh forward over prefix + its path."""
    target, draft = pair
    rec = Recorder()
    speculative_generate(target, draft, prompts(1, seed=3)[0], tree=tree, rule=rec, max_new_tokens=12)
    assert rec.seen
    for ctx in rec.seen[:3]:
        for n in range(tree.num_nodes + 1):
            chain, m = [], n
            while m > 0:
                chain.append(int(ctx.draft_tokens[0, m - 1]))
                m = tree.parents[m]
            seq = torch.tensor([ctx.prefix + chain[::-1]])
            for lm, hidden, logits in ((target, ctx.target_hidden, ctx.target_logits), (draft, ctx.draft_hidden, None)):
                if lm is draft and torch.isnan(hidden[n]).all():
                    assert n in tree.levels[-1]  # a leaf the walk never reached is not fed to the draft
                    continue
                with torch.no_grad():
                    h = lm.model.model(input_ids=seq).last_hidden_state[0, -1]
                torch.testing.assert_close(hidden[n], h, atol=1e-4, rtol=1e-4)
                if logits is not None:
                    torch.testing.assert_close(logits[n], lm.model.lm_head(h), atol=1e-4, rtol=1e-4)


def test_dd_dt_judge_runs_and_counts(pair):
    target, draft = pair
    rng = np.random.default_rng(0)
    F = feature_dim("DD-DT", draft.hidden_size, target.hidden_size)
    head = JudgeHead(0.05 * rng.normal(size=F), np.zeros(F), np.ones(F), -0.2, "DD-DT", draft.hidden_size, target.hidden_size, 0.5)
    out = speculative_generate(target, draft, prompts(1)[0], tree=DraftTree.chain(4), rule=JudgeRule(head),
                               max_new_tokens=MAX_NEW)
    s = out.summary()
    assert 0 < s["judged_accepts"] <= s["accepted_per_cycle"] * s["cycles"]
    # K draft forwards a cycle, and one more to feed the leaf only where the walk reached it
    assert s["target_forwards"] == s["cycles"]
    assert all(c.draft_forwards == 4 or (c.draft_forwards == 5 and c.accepted >= 3) for c in out.cycles)
    assert any(c.draft_forwards == 4 for c in out.cycles)


def random_acceptance_case(rng, tree):
    """Draft tokens, target argmax and a relaxed mask for one cycle, mostly exact matches."""
    N = tree.num_nodes
    draft_tokens = rng.integers(0, 3, size=(1, N))
    argmax = np.where(rng.random((1, N + 1)) < 0.7, 0, rng.integers(0, 3, size=(1, N + 1)))
    draft_tokens = np.where(rng.random((1, N)) < 0.7, 0, draft_tokens)
    relaxed = rng.random((1, N + 1)) < 0.5
    relaxed[:, 0] = False
    return draft_tokens, argmax, relaxed


@pytest.mark.parametrize("tree", [DraftTree.chain(1), DraftTree.chain(4), DraftTree.static([2, 2]),
                                  DraftTree.static([3, 1, 2]), DraftTree.static([2, 1])], ids=lambda t: f"N{t.num_nodes}")
def test_leaf_verdicts_matter_only_where_leaf_may_matter_says(tree):
    """With the last level's verdicts withheld (the draft has not fed it), the walk's result is
    the full walk's whenever leaf_may_matter is False: the lazy DD feeding changes no acceptance."""
    rng = np.random.default_rng(0)
    paths = tree.paths[None]
    leaves = tree.levels[-1]
    fed = differ = 0
    for _ in range(400):
        draft_tokens, argmax, relaxed = random_acceptance_case(rng, tree)
        withheld = relaxed.copy()
        withheld[:, leaves] = False
        lazy = accept_tree(draft_tokens, argmax, paths, withheld)
        full = accept_tree(draft_tokens, argmax, paths, relaxed)
        if leaf_may_matter(int(lazy.accepted_len[0]), tree):
            fed += 1
            differ += any((a != b).any() for a, b in zip(vars(lazy).values(), vars(full).values()))
        else:
            for a, b in zip(vars(lazy).values(), vars(full).values()):
                np.testing.assert_array_equal(a, b)
    assert 0 < fed < 400 and differ > 0  # both branches ran, and feeding the leaves can matter


@pytest.mark.parametrize("setup", ["DD-DT", "DD-DT-DD1-LS"])
@pytest.mark.parametrize("tree", [DraftTree.chain(4), DraftTree.static([2, 1, 1, 1])], ids=lambda t: f"N{t.num_nodes}")
def test_lazy_leaf_feeding_equals_feeding_every_cycle(monkeypatch, tree, setup):
    """Decoding with the last level fed only where the walk may consult it (never, for a lookahead
    judge) == feeding it in every cycle (float64, so that the draft's cache layout cannot move a near-tie)."""
    target, draft = tiny_pair(seed=0, dtype=torch.float64)
    rng = np.random.default_rng(3)
    F = feature_dim(setup, draft.hidden_size, target.hidden_size)
    head = JudgeHead(0.05 * rng.normal(size=F), np.zeros(F), np.ones(F), -0.2, setup, draft.hidden_size,
                     target.hidden_size, 0.5)
    runs = {}
    for eager in (False, True):
        rule = JudgeRule(head)
        if eager:
            monkeypatch.setattr(speculative, "leaf_may_matter", lambda accepted_len, tree: True)
            rule.lookahead = 0  # feed the deepest level wherever the walk reaches it, lookahead judge or not
        runs[eager] = [speculative_generate(target, draft, prompt, tree=tree, rule=rule,
                                            max_new_tokens=MAX_NEW) for prompt in prompts(3, seed=5)]
    for lazy, eager in zip(runs[False], runs[True]):
        assert lazy.tokens == eager.tokens
        assert [(c.accepted, c.judged) for c in lazy.cycles] == [(c.accepted, c.judged) for c in eager.cycles]
    judged = sum(c.judged for r in runs[False] for c in r.cycles)
    saved = sum(c.draft_forwards for r in runs[True] for c in r.cycles) - sum(
        c.draft_forwards for r in runs[False] for c in r.cycles)
    assert judged > 0 and saved > 0


def test_stops_at_eos_and_budget(pair):
    target, draft = pair
    prompt = prompts(1, seed=2)[0]
    ref = hf_greedy(target, prompt)
    stop = ref[9]
    out = speculative_generate(target, draft, prompt, tree=DraftTree.chain(5), stop_ids=[stop], max_new_tokens=MAX_NEW)
    assert out.stop_reason == "eos" and out.tokens == ref[: ref.index(stop) + 1]
    out = speculative_generate(target, draft, prompt, tree=DraftTree.chain(5), max_new_tokens=7)
    assert out.stop_reason == "budget" and out.tokens == ref[:7]


def test_bad_inputs(pair):
    target, draft = pair
    with pytest.raises(ValueError, match="prompt_ids is empty"):
        speculative_generate(target, draft, [], tree=DraftTree.chain(2))
    other, _ = tiny_pair(vocab=50)
    with pytest.raises(ValueError, match="vocab"):
        speculative_generate(target, other, [5], tree=DraftTree.chain(2))
    with pytest.raises(ValueError, match="branching"):
        DraftTree.static([2, 0])


@pytest.mark.parametrize("setup", ["DT", "DD-DT"])
def test_fused_op_on_cpu_equals_the_reference(pair, setup):
    """torch.ops.autojudge.accept (C++ host core here, the CUDA kernel on a GPU) == the NumPy rule."""
    target, draft = pair
    rng = np.random.default_rng(1)
    F = feature_dim(setup, draft.hidden_size, target.hidden_size)
    head = JudgeHead(0.05 * rng.normal(size=F), np.zeros(F), np.ones(F), -0.5, setup, draft.hidden_size,
                     target.hidden_size, 0.5)
    judged = 0
    for tree in (DraftTree.chain(4), DraftTree.static([2, 2])):
        for prompt in prompts(2, seed=13):
            ref = speculative_generate(target, draft, prompt, tree=tree, rule=JudgeRule(head), max_new_tokens=MAX_NEW)
            op = speculative_generate(target, draft, prompt, tree=tree, rule=JudgeRule(head), max_new_tokens=MAX_NEW,
                                      fused=True)
            assert op.tokens == ref.tokens
            assert [(c.accepted, c.judged) for c in op.cycles] == [(c.accepted, c.judged) for c in ref.cycles]
            judged += sum(c.judged for c in ref.cycles)
    assert judged > 0  # the judge really let mismatches through


def threshold_at(logit: float, above: bool) -> float:
    """The threshold nearest ``logit`` whose logit (as the rule computes it) is at most it, or just above it."""
    t = 1.0 / (1.0 + np.exp(-logit))
    while (threshold_logit(t) <= logit) == above:
        t = np.nextafter(t, 1.0 if above else 0.0)
    return float(t)


@pytest.mark.parametrize("setup", ["DT", "DD-DT"])
def test_every_threshold_inside_the_margin_decodes_the_same_tokens(pair, setup):
    """A judge run's threshold margin (lo, hi): thresholds with lo < logit(t) <= hi decode the same
    tokens and judged acceptances; just above hi the node at hi is judged too (a chain walks on)."""
    target, draft = pair
    rng = np.random.default_rng(3)
    F = feature_dim(setup, draft.hidden_size, target.hidden_size)
    head = JudgeHead(0.05 * rng.normal(size=F), np.zeros(F), np.ones(F), -0.2, setup, draft.hidden_size,
                     target.hidden_size, 0.5)
    tree, checked = DraftTree.chain(4), 0
    for prompt in prompts(6, seed=5):
        base = speculative_generate(target, draft, prompt, tree=tree, rule=JudgeRule(head, 0.45), max_new_tokens=MAX_NEW)
        lo, hi = base.judge_margin
        assert lo < np.log(0.45 / 0.55) <= hi
        inside = [threshold_at(hi, above=False)] + ([threshold_at(lo, above=True)] if np.isfinite(lo) else [0.0])
        for t in inside:
            out = speculative_generate(target, draft, prompt, tree=tree, rule=JudgeRule(head, t), max_new_tokens=MAX_NEW)
            assert out.tokens == base.tokens and out.judged_tokens == base.judged_tokens
        if np.isfinite(hi):
            above = speculative_generate(target, draft, prompt, tree=tree, rule=JudgeRule(head, threshold_at(hi, above=True)),
                                         max_new_tokens=MAX_NEW)
            assert above.judged_tokens != base.judged_tokens
            checked += 1
    assert checked >= 3 and any(speculative_generate(target, draft, p, tree=tree, rule=JudgeRule(head, 0.45),
                                                     max_new_tokens=MAX_NEW).judged_tokens for p in prompts(6, seed=5))


def test_judged_tokens_are_the_mismatches_the_rule_let_through(pair):
    """Every recorded judged acceptance is a draft token that is not the target's greedy token
    after the emitted prefix; the count equals the cycles' judged count; lossless records none."""
    target, draft = pair
    rng = np.random.default_rng(0)
    F = feature_dim("DT", draft.hidden_size, target.hidden_size)
    head = JudgeHead(0.05 * rng.normal(size=F), np.zeros(F), np.ones(F), -0.2, "DT", draft.hidden_size,
                     target.hidden_size, 0.5)
    for prompt in prompts(3):
        out = speculative_generate(target, draft, prompt, tree=DraftTree.chain(4), rule=JudgeRule(head), max_new_tokens=MAX_NEW)
        assert len(out.judged_tokens) == sum(c.judged for c in out.cycles) > 0
        for i, d, t in out.judged_tokens:
            greedy = target.session().forward(prompt + out.tokens[:i]).logits[-1].argmax().item()
            assert out.tokens[i] == d != t == greedy
        assert speculative_generate(target, draft, prompt, tree=DraftTree.chain(4), max_new_tokens=MAX_NEW).judged_tokens == []


@pytest.mark.parametrize("limit", [0, 1, 2])
def test_max_judged_caps_the_judged_acceptances_of_a_response(pair, limit):
    """At most ``limit`` judged acceptances; until the limit is reached the response is the
    unlimited one's, and after it the rest is the target's greedy continuation."""
    target, draft = pair
    F = feature_dim("DT", draft.hidden_size, target.hidden_size)
    accept_all = JudgeHead(np.zeros(F), np.zeros(F), np.ones(F), -100.0, "DT", draft.hidden_size, target.hidden_size, 0.5)
    for prompt in prompts(3):
        free = speculative_generate(target, draft, prompt, tree=DraftTree.chain(4), rule=JudgeRule(accept_all),
                                    max_new_tokens=MAX_NEW)
        out = speculative_generate(target, draft, prompt, tree=DraftTree.chain(4), rule=JudgeRule(accept_all, None, limit),
                                   max_new_tokens=MAX_NEW)
        assert len(out.judged_tokens) == min(limit, len(free.judged_tokens)) and sum(c.judged for c in out.cycles) <= limit
        if len(free.judged_tokens) > limit:
            cut = free.judged_tokens[limit][0] if limit < len(free.judged_tokens) else len(free.tokens)
            assert out.tokens[:cut] == free.tokens[:cut]
            last = out.judged_tokens[-1][0] + 1 if out.judged_tokens else 0
            rest = greedy_generate(target, prompt + out.tokens[:last], MAX_NEW - last)
            assert out.tokens[last:] == rest[: len(out.tokens) - last]
    with pytest.raises(ValueError, match="give 0 or more"):
        JudgeRule(accept_all, None, -1)

"""Speculative decoding on the tiny random pair: lossless == greedy, and the tree/cache machinery."""
import numpy as np
import pytest
import torch

from greedy_check import NEAR_TIE, greedy_gaps
from tiny_models import EOS, VOCAB, tiny_pair
from trtllm_autojudge.decoding.modes import JudgeRule, TopKRule, VerifyContext
from trtllm_autojudge.decoding.speculative import greedy_generate, speculative_generate
from trtllm_autojudge.decoding.tree import DraftTree
from trtllm_autojudge.judge.head import JudgeHead, feature_dim

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
                with torch.no_grad():
                    h = lm.model.model(input_ids=seq).last_hidden_state[0, -1]
                torch.testing.assert_close(hidden[n], h, atol=1e-4, rtol=1e-4)
                if logits is not None:
                    torch.testing.assert_close(logits[n], lm.model.lm_head(h), atol=1e-4, rtol=1e-4)


def test_dd_dt_judge_runs_and_counts(pair):
    target, draft = pair
    rng = np.random.default_rng(0)
    F = feature_dim("DD-DT", draft.hidden_size, target.hidden_size)
    head = JudgeHead(0.05 * rng.normal(size=F), np.zeros(F), np.ones(F), -0.5, "DD-DT", draft.hidden_size, target.hidden_size, 0.5)
    out = speculative_generate(target, draft, prompts(1)[0], tree=DraftTree.chain(4), rule=JudgeRule(head),
                               max_new_tokens=MAX_NEW)
    s = out.summary()
    assert 0 < s["judged_accepts"] <= s["accepted_per_cycle"] * s["cycles"]
    assert s["target_forwards"] == s["cycles"] and s["draft_forwards"] == 5 * s["cycles"]  # K + 1 for DD


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

"""The CPU route's engine stand-ins without a server: with a KV cache per request they decode what the
CPU runtime decodes, token for token in float32 (the same forwards), feed each token once, keep
requests apart, free a request's cache on release, and share the cores among the requests they hold."""
import numpy as np
import pytest
import torch

from tiny_models import EOS, VOCAB, tiny_pair
from trtllm_autojudge.decoding.modes import JudgeRule
from trtllm_autojudge.decoding.speculative import speculative_generate
from trtllm_autojudge.decoding.tree import DraftTree
from trtllm_autojudge.judge.head import JudgeHead, feature_dim
from trtllm_autojudge.trt.runner.chain_drafter import ChainTreeDrafter
from trtllm_autojudge.trt.runner.loop import engine_generate
from trtllm_autojudge.trt.runner.packing import chain_tree
from trtllm_autojudge.trt.triton.stand_ins import (CachedDraftEngine, CachedTargetEngine, KeyedDraft, KeyedTarget,
                                                   request_tree)

MAX_NEW = 24


@pytest.fixture(scope="module")
def pair():
    return tiny_pair(seed=0)


@pytest.fixture(autouse=True)
def torch_threads():
    """The stand-ins set this process's torch threads: each test gets back the count it started with."""
    threads = torch.get_num_threads()
    yield threads
    torch.set_num_threads(threads)


def head(setup, target, draft, seed=0):
    rng = np.random.default_rng(seed)
    F = feature_dim(setup, draft.hidden_size, target.hidden_size)
    return JudgeHead(rng.normal(size=F), np.zeros(F), np.ones(F), 0.0, setup, draft.hidden_size, target.hidden_size)


def prompts(n, seed=3):
    rng = np.random.default_rng(seed)
    return [rng.integers(3, VOCAB, size=int(rng.integers(2, 12))).tolist() for _ in range(n)]


def serve(draft_engine, target_engine, key, prompt, tree, threshold, end_id=-1):
    (result,) = engine_generate(ChainTreeDrafter(KeyedDraft(draft_engine, key, end_id)),
                                KeyedTarget(target_engine, key), [prompt], tree=tree, thresholds=[threshold],
                                max_new_tokens=MAX_NEW, stop_ids=[EOS])
    return result


@pytest.mark.parametrize("setup", ["DT", "DT-DT1-DT2-LS"])
@pytest.mark.parametrize("threshold", [0.0, 0.5, 0.9])
def test_stand_ins_decode_what_the_runtime_decodes_in_float32(pair, setup, threshold):
    """A chain of 4 in float32: the same forwards as speculative_generate with a model drafter, so the
    same tokens and per-cycle metrics exactly (0 = lossless; a random judge accepts mismatches)."""
    target, draft = pair
    judge = head(setup, target, draft)
    draft_engine, target_engine = CachedDraftEngine(draft), CachedTargetEngine(target, judge)
    judged = 0
    for i, prompt in enumerate(prompts(4)):
        got = serve(draft_engine, target_engine, f"r{i}", prompt, DraftTree.chain(4), threshold)
        want = speculative_generate(target, draft, prompt, tree=DraftTree.chain(4),
                                    rule=JudgeRule(judge, threshold) if threshold else None, max_new_tokens=MAX_NEW)
        assert got.tokens == want.tokens and got.stop_reason == want.stop_reason
        assert [(c.accepted, c.judged) for c in got.cycles] == [(c.accepted, c.judged) for c in want.cycles]
        judged += sum(c.judged for c in got.cycles)
    assert (judged > 0) == (threshold > 0)


def test_each_token_is_fed_once(pair):
    """No re-prefill: the target feeds the prompt once, then per cycle the root and the draft nodes;
    the draft feeds the prompt once, then per cycle what it has not seen (at most two tokens) and
    D - 1 drafted tokens."""
    target, draft = pair
    draft_engine, target_engine = CachedDraftEngine(draft), CachedTargetEngine(target, head("DT", target, draft))
    prompt, D = prompts(1)[0], 4
    result = serve(draft_engine, target_engine, "r", prompt, DraftTree.chain(D), 0.0)
    cycles = len(result.cycles)
    assert cycles > 2
    assert target_engine.cache.fed_tokens == len(prompt) + cycles * D + (cycles - 1)
    assert len(prompt) + cycles * (D - 1) < draft_engine.cache.fed_tokens <= len(prompt) + cycles * (D - 1) + 2 * (cycles - 1)


def test_requests_interleaved_under_their_keys_decode_as_alone(pair):
    """A request with another request's cycle run before each of its own, in one pair of stand-ins,
    decodes as it does alone; a release frees exactly its request's cache."""
    target, draft = pair
    judge = head("DT", target, draft)
    (a, b), tree = prompts(2, seed=5), chain_tree(3, 2)
    alone = [serve(CachedDraftEngine(draft), CachedTargetEngine(target, judge), "x", p, tree, 0.5).tokens
             for p in (a, b)]
    draft_engine, target_engine = CachedDraftEngine(draft), CachedTargetEngine(target, judge)
    drafters = {k: ChainTreeDrafter(KeyedDraft(draft_engine, k)) for k in "ab"}
    verifiers = {k: KeyedTarget(target_engine, k) for k in "ab"}

    class Alternating:  # each verify of one first runs a cycle of the other
        def __init__(self, me, other, other_prompt):
            self.me, self.other, self.other_prompt = me, other, other_prompt
            self.needs_draft_hidden, self.needs_greedy_child = False, False

        def verify(self, cycle):
            engine_generate(drafters[self.other], verifiers[self.other], [self.other_prompt], tree=tree,
                            thresholds=[0.5], max_new_tokens=1, stop_ids=[EOS])
            return verifiers[self.me].verify(cycle)

    (got_a,) = engine_generate(drafters["a"], Alternating("a", "b", b), [a], tree=tree, thresholds=[0.5],
                               max_new_tokens=MAX_NEW, stop_ids=[EOS])
    assert got_a.tokens == alone[0]
    assert set(target_engine.cache.sequences) == {"a", "b"} == set(draft_engine.cache.sequences)
    assert target_engine.cache.release("b") and draft_engine.cache.release("b")
    assert set(target_engine.cache.sequences) == {"a"} and not target_engine.cache.release("b")


def test_the_cores_are_shared_by_the_requests_held(pair):
    """Holding n requests, a stand-in computes on cores // n threads (at least 1); releases give them
    back, and the requests decode as they do alone on every core."""
    _, draft = pair
    torch.set_num_threads(4)
    engine, alone = CachedDraftEngine(draft), CachedDraftEngine(draft)
    a, b, c = prompts(3, seed=9)
    expected = {p_key: alone.generate("x", p, 4, -1, False).tokens for p_key, p in zip("abc", (a, b, c))}
    alone.cache.release("x")
    for key, prompt, threads in (("a", a, 4), ("b", b, 2), ("c", c, 1), ("a", a, 1)):
        assert engine.generate(key, prompt, 4, -1, False).tokens == expected[key]
        assert torch.get_num_threads() == threads
    for key, threads in (("c", 2), ("b", 4), ("a", 4)):
        engine.cache.release(key)
        assert torch.get_num_threads() == threads


def test_a_cache_never_serves_tokens_it_was_not_fed(pair):
    """A key reused for another prompt (or a prefix that changed) cuts its cache back to the common
    prefix: the draft then drafts what a fresh cache drafts."""
    _, draft = pair
    engine, fresh = CachedDraftEngine(draft), CachedDraftEngine(draft)
    a, b = prompts(2, seed=7)
    engine.generate("k", a + b, 4, -1, False)
    for prompt in (a + [b[0] + 1], b, a + b + [5]):
        assert engine.generate("k", prompt, 4, -1, True).tokens == fresh.generate("new", prompt, 4, -1, True).tokens
        assert engine.cache.sequences["k"].tokens == prompt + engine.generate("k", prompt, 4, -1, False).tokens[:-1]


def test_the_draft_stops_after_end_id_and_returns_its_logits(pair):
    _, draft = pair
    engine = CachedDraftEngine(draft)
    prompt = prompts(1)[0]
    free = engine.generate("a", prompt, 6, -1, True)
    stopped = engine.generate("b", prompt, 6, free.tokens[1], True)
    assert stopped.tokens == free.tokens[:2]  # the end_id token included, as the tensorrtllm backend returns it
    assert free.logits.shape == stopped.logits.shape == (6, draft.vocab_size)
    assert [int(np.argmax(row)) for row in free.logits] == free.tokens
    assert not stopped.logits[2:].any()  # rows past the generated tokens
    with pytest.raises(ValueError, match="request_output_len >= 1"):
        engine.generate("c", prompt, 0, -1, False)


def test_request_tree_reads_the_valid_nodes_from_the_paths():
    tree = chain_tree(3, 2)  # nodes level by level: (1, 2), (3, 4), (5, 6); the chain is 1, 3, 5
    paths = tree.paths
    assert request_tree(paths, tree.num_nodes).parents == tree.parents
    assert request_tree(paths, 3).parents == (-1, 0, 0, 1)
    assert request_tree(np.asarray([[0, 1, 2, 3]]), 3).is_chain

"""Engine path on CPU: cycle packing, chain trees, and the engine loop with the reference engines
against the reference speculative loop (same tokens, same per-cycle metrics)."""
import numpy as np
import pytest

from tiny_models import EOS, VOCAB, tiny_pair
from trtllm_autojudge.decoding.modes import JudgeRule
from trtllm_autojudge.decoding.speculative import greedy_generate, speculative_generate
from trtllm_autojudge.decoding.tree import DraftTree
from trtllm_autojudge.judge.head import JudgeHead, feature_dim
from trtllm_autojudge.trt import io_spec
from trtllm_autojudge.trt.drafts import draft_from_outputs, top_tokens
from trtllm_autojudge.trt.loop import engine_generate
from trtllm_autojudge.trt.packing import chain_tree, check_chain_tree, engine_feed, pack_cycle, tree_from_chain
from trtllm_autojudge.trt.reference_engine import ReferenceDrafter, ReferenceTargetEngine

MAX_NEW = 16



@pytest.fixture(scope="module")
def pair64():
    """The tiny pair in float64: the engine loop recomputes context rows, the reference loop uses a KV
    cache; in float64 the two agree far below any argmax or threshold gap."""
    target, draft = tiny_pair(seed=0)
    target.model.double()
    draft.model.double()
    return target, draft


def random_head(setup, target, draft, seed=0):
    rng = np.random.default_rng(seed)
    F = feature_dim(setup, draft.hidden_size, target.hidden_size)
    return JudgeHead(rng.normal(size=F), np.zeros(F), np.ones(F), 0.0, setup, draft.hidden_size, target.hidden_size)


def prompts(n, seed=3):
    rng = np.random.default_rng(seed)
    return [rng.integers(3, VOCAB, size=int(rng.integers(1, 9))).tolist() for _ in range(n)]


def test_chain_tree_shape_and_checks():
    tree = chain_tree(3, 2)
    assert tree.parents == (-1, 0, 0, 1, 1, 3, 3) and tree.ranks == (0, 0, 1, 0, 1, 0, 1)
    assert tree.num_nodes == 6 and tree.max_depth == 3 and len(tree.paths) == 4
    assert chain_tree(4) == DraftTree.chain(4)
    check_chain_tree(DraftTree.chain(5))
    with pytest.raises(ValueError, match="continues its greedy chain"):
        check_chain_tree(DraftTree.static([2, 2]))  # the rank-1 node at depth 1 has children


def test_tree_from_chain_takes_siblings_from_the_top_tokens():
    tree = chain_tree(2, 3)  # nodes: depth 1 = 1 (rank 0), 2, 3; depth 2 = 4 (rank 0), 5, 6
    chain = np.array([[10, 20]])
    topk = np.array([[[10, 11, 12], [20, 21, 22]]])
    tokens, lens = tree_from_chain(chain, topk, np.array([2]), tree)
    assert tokens.tolist() == [[10, 11, 12, 20, 21, 22]] and lens.tolist() == [6]
    tokens, lens = tree_from_chain(chain, topk, np.array([1]), tree)  # the draft stopped after one step
    assert lens.tolist() == [3]
    with pytest.raises(ValueError, match="top-3"):
        tree_from_chain(chain, None, np.array([2]), tree)


def test_pack_cycle_rows_and_node_positions():
    tree = chain_tree(2, 2)  # paths (one per leaf, in node order): [0,2,-1], [0,1,3], [0,1,4]
    prefixes = [[7, 8, 9], [5]]
    node_tokens = np.array([[11, 12, 13, 14], [21, 22, 23, 24]])
    cycle = pack_cycle(prefixes, tree, node_tokens, np.array([4, 2]), np.array([0.2, 0.7]))
    tokens, offsets = cycle.input_ids.tolist(), np.concatenate([[0], np.cumsum(cycle.context_lengths)])
    rows = [tokens[a:b] for a, b in zip(offsets[:-1], offsets[1:])]
    # request 0: every path; request 1: nodes 3 and 4 are past draft_lens, so its rows stop at depth 1
    assert rows == [[7, 8, 9, 12], [7, 8, 9, 11, 13], [7, 8, 9, 11, 14], [5, 22], [5, 21]]
    assert cycle.row_request.tolist() == [0, 0, 0, 1, 1]
    assert cycle.position_ids.tolist()[:9] == [0, 1, 2, 3, 0, 1, 2, 3, 4]
    for b, prefix in enumerate(prefixes):
        rowpos = cycle.node_rows[b * 5:(b + 1) * 5]
        assert tokens[rowpos[0]] == prefix[-1]  # the root
        for n in range(1, 5):
            if n <= cycle.draft_lens[b]:
                assert tokens[rowpos[n]] == node_tokens[b, n - 1]
                assert tokens[rowpos[n] - 1] == (prefix[-1] if tree.parents[n] == 0 else node_tokens[b, tree.parents[n] - 1])
            else:
                assert rowpos[n] == rowpos[0]  # invalid nodes point at the root
    assert cycle.paths.shape == (2, 3, 3) and cycle.threshold.dtype == np.float32
    feed = engine_feed(cycle, num_layers=4, max_input_len=64, max_seq_len=64)
    assert feed["last_token_ids"][0].tolist() == np.cumsum(cycle.context_lengths).tolist()
    assert {n for n, (_, host) in feed.items() if host} == {
        "host_context_lengths", "host_request_types", "host_max_attention_window_sizes", "host_sink_token_length",
        "host_runtime_perf_knobs", "host_context_progress"}
    assert set(io_spec.ENGINE_INPUTS) - {io_spec.DRAFT_HIDDEN} <= set(feed)
    assert feed["host_runtime_perf_knobs"][0].dtype == np.int64
    with pytest.raises(ValueError, match="max_input_len"):
        engine_feed(cycle, 4, max_input_len=4, max_seq_len=64)


def test_draft_from_engine_outputs():
    prefixes = [[1, 2], [3]]
    output_ids = np.array([[1, 2, 5, 6, 7], [3, 9, 2, 2, 2]])  # request 1 stopped at EOS=2 after one step... and its pad
    logits = np.zeros((2, 3, 12))
    logits[0, :, 5], logits[0, :, 4] = 3.0, 2.0
    chain, topk, valid = draft_from_outputs(prefixes, output_ids, np.array([5, 3]), logits, 3, 2, 10, end_id=2)
    assert chain.tolist() == [[5, 6, 7], [9, 2, 2]] and valid.tolist() == [3, 2]
    assert topk.shape == (2, 3, 2) and topk[0, 0].tolist() == [5, 4]
    assert top_tokens(np.array([1.0, 3.0, 3.0, 0.0]), 3).tolist() == [1, 2, 0]  # ties: lower id first
    with pytest.raises(ValueError, match="generation logits"):
        draft_from_outputs(prefixes, output_ids, np.array([5, 3]), None, 3, 2, 10, end_id=2)


@pytest.mark.parametrize("setup", ["DT", "DD-DT"])
@pytest.mark.parametrize("tree", [DraftTree.chain(4), chain_tree(3, 2)], ids=["chain4", "tree3x2"])
def test_engine_loop_equals_reference_loop(pair64, setup, tree):
    target, draft = pair64
    head = random_head(setup, target, draft)
    batch = prompts(3)
    thresholds = [0.0, 0.3, 0.6]  # per request; 0 = lossless
    results = engine_generate(ReferenceDrafter(draft), ReferenceTargetEngine(target, head), batch, tree=tree,
                              thresholds=thresholds, max_new_tokens=MAX_NEW, stop_ids=[EOS])
    judged = 0
    for prompt, t, res in zip(batch, thresholds, results):
        ref = speculative_generate(target, draft, prompt, tree=tree, rule=JudgeRule(head, t), max_new_tokens=MAX_NEW)
        assert res.tokens == ref.tokens and res.stop_reason == ref.stop_reason
        assert [(c.accepted, c.judged) for c in res.cycles] == [(c.accepted, c.judged) for c in ref.cycles]
        judged += sum(c.judged for c in res.cycles)
        if t == 0.0:
            assert res.tokens == greedy_generate(target, prompt, MAX_NEW)
            assert all(c.judged == 0 for c in res.cycles)
    assert judged > 0  # the thresholds above let the judge accept some mismatches


def test_engine_loop_refuses_bad_thresholds(pair64):
    target, draft = pair64
    head = random_head("DT", target, draft)
    with pytest.raises(ValueError, match="thresholds must lie in"):
        engine_generate(ReferenceDrafter(draft), ReferenceTargetEngine(target, head), [[5]], tree=DraftTree.chain(2),
                        thresholds=[1.5], max_new_tokens=4, stop_ids=[EOS])

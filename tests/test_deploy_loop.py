"""Engine path on CPU: cycle packing, chain trees, and the engine loop with the reference engines
against the reference speculative loop (same tokens, same per-cycle metrics), for every judge setup
the context route runs (DT, DD-DT and the lookahead ones)."""
import dataclasses
import numpy as np
import pytest

import torch

from lookahead_reference import judge_head, tree_judge_logits
from tiny_models import EOS, VOCAB, tiny_pair
from trtllm_autojudge.decoding.modes import JudgeRule
from trtllm_autojudge.decoding.speculative import greedy_generate, speculative_generate
from trtllm_autojudge.decoding.tree import DraftTree
from trtllm_autojudge.judge.head import JudgeHead, feature_dim
from trtllm_autojudge.trt.engine import io_spec
from trtllm_autojudge.trt.runner.chain_drafter import ChainTreeDrafter
from trtllm_autojudge.trt.runner.drafts import draft_from_outputs, node_context, top_tokens, unfed_nodes
from trtllm_autojudge.trt.runner.loop import engine_generate
from trtllm_autojudge.trt.runner.packing import chain_tree, check_chain_tree, engine_feed, pack_cycle, tree_from_chain
from trtllm_autojudge.trt.runner.reference_engine import (ReferenceDraftEngine, ReferenceDrafter,
                                                           ReferenceTargetEngine, node_judge_logits)

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
    tree = chain_tree(2, 2)  # paths (one per leaf, depth first): [0,1,3], [0,1,4], [0,2,-1]
    prefixes = [[7, 8, 9], [5]]
    node_tokens = np.array([[11, 12, 13, 14], [21, 22, 23, 24]])
    cycle = pack_cycle(prefixes, tree, node_tokens, np.array([4, 2]), np.array([0.2, 0.7]))
    tokens, offsets = cycle.input_ids.tolist(), np.concatenate([[0], np.cumsum(cycle.context_lengths)])
    rows = [tokens[a:b] for a, b in zip(offsets[:-1], offsets[1:])]
    # request 0: every path; request 1: nodes 3 and 4 are past draft_lens, so its rows stop at depth 1
    assert rows == [[7, 8, 9, 11, 13], [7, 8, 9, 11, 14], [7, 8, 9, 12], [5, 21], [5, 22]]
    assert cycle.row_request.tolist() == [0, 0, 0, 1, 1]
    assert cycle.position_ids.tolist()[:9] == [0, 1, 2, 3, 4, 0, 1, 2, 3]
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
    assert set(io_spec.ENGINE_INPUTS) - {io_spec.DRAFT_HIDDEN, io_spec.GREEDY_CHILD} == set(feed) & set(
        io_spec.ENGINE_INPUTS)  # a DT judge's: no draft hidden states, no greedy children
    assert feed["host_runtime_perf_knobs"][0].dtype == np.int64
    with pytest.raises(ValueError, match="max_input_len"):
        engine_feed(cycle, 4, max_input_len=4, max_seq_len=64)
    # a lookahead judge's cycle: the tree's greedy children, [B, N+1], the same for every request
    ahead = pack_cycle(prefixes, tree, node_tokens, np.array([4, 2]), np.array([0.2, 0.7]), greedy_child=True)
    fed = engine_feed(ahead, num_layers=4, max_input_len=64, max_seq_len=64)[io_spec.GREEDY_CHILD]
    assert fed[0].dtype == np.int32 and not fed[1]  # on the device
    assert fed[0].tolist() == [[1, 3, -1, -1, -1]] * 2 == [tree.greedy_child.tolist()] * 2


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


def test_unfed_nodes_and_their_contexts():
    tree = chain_tree(2, 2)  # depth 1: node 1 (chain), 2 (sibling); depth 2: node 3 (chain), 4 (sibling)
    # request 0 drafted both chain steps: the chain generation fed the root and node 1;
    # request 1 stopped after one step: it fed the root only, and nodes 3, 4 are not valid
    assert unfed_nodes(tree, np.array([4, 2]), np.array([2, 1])) == [(0, 2), (0, 3), (0, 4), (1, 1), (1, 2)]
    assert unfed_nodes(DraftTree.chain(3), np.array([3]), np.array([3])) == [(0, 3)]  # the chain's last node
    node_tokens = np.array([11, 12, 13, 14])
    assert node_context([7, 8], tree, node_tokens, 4) == [7, 8, 11, 14]
    assert node_context([7, 8], tree, node_tokens, 2) == [7, 8, 12]


@pytest.mark.parametrize("tree", [DraftTree.chain(4), chain_tree(3, 2)], ids=["chain4", "tree3x2"])
def test_drafted_hidden_states_are_the_drafts_state_at_each_node(pair64, tree):
    """What the DD-DT target engine receives: row n of request b is the draft's final-norm hidden
    state with node n as the last input token, for every valid node, whichever pass computed it;
    one request stops early at its end_id (the executor does), so its last node comes from the leaf pass."""
    _, draft = pair64
    batch = prompts(3)
    end_id = ReferenceDraftEngine(draft).generate(batch[:1], 2, logits=False, hidden=False)[0].tokens[1]
    proposal = ReferenceDrafter(draft, end_id=end_id).propose(batch, tree, need_hidden=True)
    assert proposal.draft_hidden.shape == (3, tree.num_nodes + 1, draft.hidden_size)
    assert proposal.draft_lens[0] < tree.num_nodes  # request 0 stopped after drafting end_id at depth 2
    assert proposal.forwards == tree.max_depth + 1  # the chain generation, then one pass over the unfed nodes
    for b, prefix in enumerate(batch):
        for n in range(tree.num_nodes + 1):
            if n <= proposal.draft_lens[b]:
                want = draft.session().forward(node_context(prefix, tree, proposal.node_tokens[b], n)).hidden[-1]
                np.testing.assert_allclose(proposal.draft_hidden[b, n], want.numpy(), rtol=1e-9, atol=1e-9)
            else:
                assert not proposal.draft_hidden[b, n].any()  # nodes past draft_lens: zero rows
    cycle = pack_cycle(batch, tree, proposal.node_tokens, proposal.draft_lens, np.zeros(3), proposal.draft_hidden)
    fed = engine_feed(cycle, num_layers=2, max_input_len=64, max_seq_len=64)[io_spec.DRAFT_HIDDEN][0]
    assert fed.shape == (3 * (tree.num_nodes + 1), draft.hidden_size)  # [B*(N+1), Hd], row b*(N+1)+n
    np.testing.assert_array_equal(fed.reshape(proposal.draft_hidden.shape), proposal.draft_hidden.astype(np.float32))
    dt = ReferenceDrafter(draft, end_id=end_id).propose(batch, tree, need_hidden=False)
    assert dt.draft_hidden is None and dt.forwards == tree.max_depth
    assert np.array_equal(dt.node_tokens, proposal.node_tokens) and np.array_equal(dt.draft_lens, proposal.draft_lens)


def test_drafter_refuses_dd_dt_on_an_engine_without_hidden_output(pair64):
    _, draft = pair64
    drafter = ChainTreeDrafter(ReferenceDraftEngine(draft, returns_hidden=False))
    with pytest.raises(ValueError, match="build-engines --judge"):
        drafter.propose([[5, 6]], DraftTree.chain(2), need_hidden=True)
    assert drafter.propose([[5, 6]], DraftTree.chain(2), need_hidden=False).draft_hidden is None


# (setup, tree): DT and DD-DT on a chain and a chain tree; the lookahead setups on deeper ones (the last
# two levels of a tree give no verdict), DT1-DD with the draft block after a lookahead block
LOOP_CASES = ([(setup, tree) for setup in ("DT", "DD-DT") for tree in (DraftTree.chain(4), chain_tree(3, 2))]
              + [(setup, tree) for setup in ("DT-DT1-DT2-LS", "DD-DT-DT1-DT2-DD1-LS", "DT1-DD")
                 for tree in (DraftTree.chain(5), chain_tree(4, 2))])


@pytest.mark.parametrize("setup, tree", LOOP_CASES,
                         ids=[f"{s}-{'chain' if t.is_chain else 'tree'}{t.num_nodes}" for s, t in LOOP_CASES])
def test_engine_loop_equals_reference_loop(pair64, setup, tree):
    """Every setup the context route runs: a lookahead judge's cycles carry the tree's greedy
    children, from which the reference engine reads the rows of each node's greedy child and
    grandchild; the loop equals the Python runtime with JudgeRule (which reads them from the tree)."""
    target, draft = pair64
    head = random_head(setup, target, draft)
    engine = ReferenceTargetEngine(target, head)
    assert engine.needs_greedy_child == (head.lookahead > 0) and engine.needs_draft_hidden == head.needs_draft_hidden
    assert loop_equals_rule(target, draft, engine, tree, [0.0, 0.3, 0.6]) > 0  # per request; 0 = lossless


def loop_equals_rule(target, draft, engine, tree, thresholds) -> int:
    """Assert the engine loop decodes each request as the Python runtime with JudgeRule at its
    threshold (greedy decoding at 0); return the judged acceptances."""
    batch = prompts(len(thresholds))
    results = engine_generate(ReferenceDrafter(draft), engine, batch, tree=tree, thresholds=thresholds,
                              max_new_tokens=MAX_NEW, stop_ids=[EOS])
    judged = 0
    for prompt, t, res in zip(batch, thresholds, results):
        ref = speculative_generate(target, draft, prompt, tree=tree, rule=JudgeRule(engine.head, t),
                                   max_new_tokens=MAX_NEW)
        assert res.tokens == ref.tokens and res.stop_reason == ref.stop_reason
        assert [(c.accepted, c.judged) for c in res.cycles] == [(c.accepted, c.judged) for c in ref.cycles]
        judged += sum(c.judged for c in res.cycles)
        if t == 0.0:
            assert res.tokens == greedy_generate(target, prompt, MAX_NEW)
            assert all(c.judged == 0 for c in res.cycles)
    return judged


@pytest.mark.parametrize("tree", [DraftTree.chain(5), chain_tree(4, 2)], ids=["chain5", "tree4x2"])
def test_engine_loop_applies_the_judges_minimum_run(pair64, tree):
    """The reference engine applies a judge's minimum run as the plugin's min_run does: the loop
    equals the Python runtime with JudgeRule, whose judgeable nodes open at least that many tokens."""
    target, draft = pair64
    head = random_head("DT", target, draft)
    head = dataclasses.replace(head, meta={**head.meta, "min_run": 3})
    assert loop_equals_rule(target, draft, ReferenceTargetEngine(target, head), tree, [0.3, 0.6, 0.9]) > 0


@pytest.mark.parametrize("setup", ["DT-DT1-DT2-LS", "DD-DT-DT1-DT2-DD1-LS"])
def test_a_greedy_child_past_draft_lens_counts_as_none(setup):
    """Requests drafted short (the draft engine stopped at its end_id): the reference engine's judge
    logits at every mismatch equal JudgeRule's on the tree cut after draft_lens[b]
    (tests/lookahead_reference.py, the reference of the plugin's accept mode), so a node whose greedy
    child or grandchild lies past draft_lens has no verdict, as in the plugin."""
    rng = np.random.default_rng(2)
    tree, V, HT, HD = chain_tree(4, 2), 7, 8, 6
    B, N = 4, tree.num_nodes
    head = judge_head(setup, rng.normal(size=feature_dim(setup, HD, HT)), 0.3, HT, HD)
    logits = torch.as_tensor(rng.normal(size=(B * (N + 1), V)), dtype=torch.float32)  # [B*(N+1), V]
    hidden = torch.as_tensor(rng.normal(size=(B * (N + 1), HT)), dtype=torch.float32)  # [B*(N+1), Ht]
    draft_hidden = torch.as_tensor(rng.normal(size=(B * (N + 1), HD)), dtype=torch.float32)  # [B*(N+1), Hd]
    tokens = rng.integers(0, V, size=(B, N))  # [B, N]
    lens = np.array([N, 5, 3, 1])  # [B]
    want = tree_judge_logits(head, tree, logits, hidden, draft_hidden if head.needs_draft_hidden else None, tokens,
                             lens)  # [B, N+1]: +inf off the mismatches
    argmax = logits.argmax(-1).numpy().reshape(B, N + 1)
    decided = 0
    for b in range(B):
        rows = slice(b * (N + 1), (b + 1) * (N + 1))
        got = node_judge_logits(head, tokens[b], tree.greedy_child, int(lens[b]), logits[rows], hidden[rows],
                                draft_hidden[rows] if head.needs_draft_hidden else None)
        parents = np.asarray(tree.parents[1:])
        mismatch = np.concatenate([[False], (tokens[b] != argmax[b, parents]) & (np.arange(1, N + 1) <= lens[b])])
        np.testing.assert_array_equal(got[mismatch], want[b][mismatch])
        assert np.all(np.isinf(got[int(lens[b]) + 1:])) and np.isinf(got[0])
        decided += int(np.isfinite(got[mismatch]).sum())
    assert decided > 0 and np.isinf(want[3]).all()  # a one-node draft: no node has a greedy grandchild


def test_engine_loop_refuses_bad_thresholds(pair64):
    target, draft = pair64
    head = random_head("DT", target, draft)
    with pytest.raises(ValueError, match="thresholds must lie in"):
        engine_generate(ReferenceDrafter(draft), ReferenceTargetEngine(target, head), [[5]], tree=DraftTree.chain(2),
                        thresholds=[1.5], max_new_tokens=4, stop_ids=[EOS])

"""The reference acceptance rule: hand-computed cases, properties, and bad input."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trtllm_autojudge.decoding.rules import judge_relaxed, threshold_logit
from trtllm_autojudge.decoding.tree import DraftTree, node_parents
from trtllm_autojudge.spec.acceptance import PAD, accept_tree


def chain(k):
    return DraftTree.chain(k).paths[None]  # [1, 1, K+1]


def test_chain_exact_prefix_then_correction():
    # draft 5 7 9 4; target says 5 7 8 ... -> accept 5 7, correction 8
    acc = accept_tree([[5, 7, 9, 4]], [[5, 7, 8, 3, 1]], chain(4))
    assert acc.accepted_len.tolist() == [2]
    assert acc.tokens(0) == [5, 7, 8]
    assert acc.accepted_tokens.tolist() == [[5, 7, 8, -1, -1]]
    assert acc.judged_count.tolist() == [0]


def test_chain_all_accepted_emits_bonus():
    acc = accept_tree([[5, 7]], [[5, 7, 11]], chain(2))
    assert acc.tokens(0) == [5, 7, 11]  # bonus = target argmax at the last node


def test_judged_mismatch_is_accepted_and_counted():
    # nodes 1, 2 match; node 3 (9) mismatches the target's 8: relaxing node 2 changes nothing
    relaxed = [[False, False, True, False, False]]
    acc = accept_tree([[5, 7, 9, 4]], [[5, 7, 8, 4, 6]], chain(4), relaxed)
    assert acc.accepted_len.tolist() == [2]
    relaxed = [[False, False, False, True, False]]
    acc = accept_tree([[5, 7, 9, 4]], [[5, 7, 8, 4, 6]], chain(4), relaxed)
    assert acc.tokens(0) == [5, 7, 9, 4, 6]
    assert acc.judged_count.tolist() == [1]


def test_empty_draft_gives_target_token():
    acc = accept_tree(np.zeros((1, 0), int), [[42]], chain(0))
    assert acc.tokens(0) == [42] and acc.accepted_len[0] == 0
    acc = accept_tree([[5, 7]], [[5, 7, 11]], chain(2), draft_lens=[0])
    assert acc.tokens(0) == [5]


def test_draft_lens_cut_the_path():
    acc = accept_tree([[5, 7, 9]], [[5, 7, 9, 2]], chain(3), draft_lens=[2])
    assert acc.tokens(0) == [5, 7, 9]  # node 3 is past draft_lens: correction = argmax at node 2


def test_tree_best_path_and_ties():
    tree = DraftTree.static([2, 1])  # nodes: 1,2 children of root; 3 child of 1; 4 child of 2
    paths = tree.paths[None]
    assert paths[0].tolist() == [[0, 1, 3], [0, 2, 4]]
    # root argmax 10; node 1 = 10 (exact), node 2 = 20 (mismatch), node 3 = 30 vs argmax[1]=31, node 4 = 40 vs argmax[2]=40
    argmax = [[10, 31, 40, 7, 8]]
    acc = accept_tree([[10, 20, 30, 40]], argmax, paths)
    assert acc.best_path[0] == 0 and acc.tokens(0) == [10, 31]
    # judge node 2 through: path 1 accepts 2 nodes (20 judged, 40 exact) -> longer wins
    relaxed = np.zeros((1, 5), bool)
    relaxed[0, 2] = True
    acc = accept_tree([[10, 20, 30, 40]], argmax, paths, relaxed)
    assert acc.best_path[0] == 1 and acc.tokens(0) == [20, 40, 8] and acc.judged_count[0] == 1
    # equal lengths: fewer judged wins; then the lower path index
    relaxed = np.zeros((1, 5), bool)
    relaxed[0, 2] = True
    acc = accept_tree([[10, 20, 30, 41]], argmax, paths, relaxed)  # both paths accept 1 node
    assert acc.best_path[0] == 0 and acc.judged_count[0] == 0
    # everything relaxed, every node a mismatch: both paths accept 2 nodes with 2 judged -> path 0
    acc = accept_tree([[11, 20, 30, 41]], argmax, paths, np.ones((1, 5), bool) & (np.arange(5) > 0))
    assert acc.best_path[0] == 0 and acc.accepted_len[0] == 2 and acc.judged_count[0] == 2


def test_padding_rows_and_no_path():
    paths = np.array([[[PAD, PAD], [0, 1]]])
    acc = accept_tree([[3]], [[3, 4]], paths)
    assert acc.best_path[0] == 1 and acc.tokens(0) == [3, 4]
    acc = accept_tree([[3]], [[3, 4]], np.full((1, 1, 2), PAD))
    assert acc.best_path[0] == 0 and acc.tokens(0) == [3]


def test_judge_relaxed_threshold_and_nonfinite():
    logit = np.array([[0.0, -1.0, 0.5, np.nan, np.inf, -np.inf, 2.0]])
    r = judge_relaxed(logit, 0.5)  # cut = 0
    assert r.tolist() == [[False, True, False, False, False, False, False]]
    assert not judge_relaxed(logit, 0.0).any()  # threshold 0: the judge never accepts
    assert judge_relaxed(logit, 1.0).tolist() == [[False, True, True, False, False, False, True]]
    assert threshold_logit(np.array([0.5]))[0] == 0.0


@pytest.mark.parametrize("bad, match", [
    (dict(draft_tokens=[[1, 2]], target_argmax=[[1, 2]], paths=chain(2)), "target_argmax"),
    (dict(draft_tokens=[[1, 2]], target_argmax=[[1, 2, 3]], paths=np.array([[[0, 1, 3]]])), "node index 3"),
    (dict(draft_tokens=[[1, 2]], target_argmax=[[1, 2, 3]], paths=np.array([[[1, 2, -1]]])), "root"),
    (dict(draft_tokens=[[1, 2]], target_argmax=[[1, 2, 3]], paths=chain(2), draft_lens=[3]), "draft_lens"),
    (dict(draft_tokens=[[1, 2]], target_argmax=[[1, 2, 3]], paths=chain(2), relaxed=[[True]]), "relaxed"),
    (dict(draft_tokens=[1, 2], target_argmax=[[1, 2, 3]], paths=chain(2)), "draft_tokens"),
])
def test_bad_input_names_the_argument(bad, match):
    with pytest.raises(ValueError, match=match):
        accept_tree(**{k: np.asarray(v) for k, v in bad.items()})


def test_threshold_outside_unit_interval():
    with pytest.raises(ValueError, match="threshold"):
        judge_relaxed(np.zeros((1, 3)), 1.5)


def test_node_parents_rejects_non_tree():
    with pytest.raises(ValueError, match="two parents"):
        node_parents(np.array([[[0, 1, 2], [0, 3, 2]]]))
    assert node_parents(DraftTree.static([2, 2]).paths[None])[0].tolist() == list(DraftTree.static([2, 2]).parents)



def test_tree_paths_and_masks_follow_the_parents():
    tree = DraftTree.static([2, 2])  # parents (-1, 0, 0, 1, 1, 2, 2)
    assert tree.path_to(0) == [] and tree.path_to(2) == [2] and tree.path_to(6) == [2, 6]
    assert tree.paths.tolist() == [[0, 1, 3], [0, 1, 4], [0, 2, 5], [0, 2, 6]]
    assert np.flatnonzero(tree.ancestor_mask[5]).tolist() == [0, 2, 5]
    assert DraftTree.chain(3).path_to(3) == [1, 2, 3]

# ---- properties on random inputs, against a second (vectorised) formulation of the rule ----

def vectorised_rule(draft_tokens, target_argmax, paths, relaxed, draft_lens):
    """Same contract as accept_tree, computed with array ops instead of loops."""
    B, P, D1 = paths.shape
    out = []
    for b in range(B):
        node = paths[b, :, 1:]  # [P, D]
        parent = paths[b, :, :-1]
        valid = (node > 0) & (node <= draft_lens[b]) & (parent >= 0) & (paths[b, :, :1] == 0)
        tok = draft_tokens[b][np.clip(node - 1, 0, None)]
        exact = tok == target_argmax[b][np.clip(parent, 0, None)]
        ok = valid & (exact | relaxed[b][np.clip(node, 0, None)])
        run = np.cumprod(ok, axis=1)  # [P, D]
        length = run.sum(1)
        judged = (run & ~exact).sum(1)
        length = np.where(paths[b, :, 0] == 0, length, -1)
        order = np.lexsort((np.arange(P), judged, -length))
        p = order[0] if length.max(initial=-1) >= 0 else 0
        out.append((max(int(length[p]), 0), int(p), int(judged[p]) if length[p] > 0 else 0))
    return out


@st.composite
def random_case(draw):
    B = draw(st.integers(1, 4))
    branching = draw(st.lists(st.integers(1, 3), min_size=1, max_size=4))
    tree = DraftTree.static(branching)
    N = tree.num_nodes
    vocab = draw(st.integers(2, 4))  # tiny vocab: many exact matches and ties
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    draft_tokens = rng.integers(0, vocab, (B, N))
    target_argmax = rng.integers(0, vocab, (B, N + 1))
    logit = rng.normal(size=(B, N + 1))
    logit[rng.random((B, N + 1)) < 0.15] = np.nan
    logit[rng.random((B, N + 1)) < 0.1] = np.inf * rng.choice([-1, 1])
    threshold = rng.choice([0.0, 0.3, 0.5, 0.8, 1.0], B)
    draft_lens = rng.integers(0, N + 1, B) if draw(st.booleans()) else np.full(B, N)
    paths = np.repeat(tree.paths[None], B, 0)
    if draw(st.booleans()):  # padding path rows in front
        paths = np.concatenate([np.full((B, 1, paths.shape[2]), PAD), paths], 1)
    return draft_tokens, target_argmax, paths, judge_relaxed(logit, threshold), draft_lens, logit


@settings(max_examples=300, deadline=None)
@given(random_case())
def test_rule_matches_vectorised_formulation(case):
    draft_tokens, target_argmax, paths, relaxed, draft_lens, logit = case
    acc = accept_tree(draft_tokens, target_argmax, paths, relaxed, draft_lens)
    for b, (length, p, judged) in enumerate(vectorised_rule(draft_tokens, target_argmax, paths, relaxed, draft_lens)):
        assert (acc.accepted_len[b], acc.best_path[b], acc.judged_count[b]) == (length, p, judged)
        nodes = paths[b, p, 1 : length + 1]
        assert acc.accepted_tokens[b, :length].tolist() == draft_tokens[b, nodes - 1].tolist()
        last = nodes[-1] if length else 0
        assert acc.accepted_tokens[b, length] == target_argmax[b, last]  # correction or bonus token
        assert (acc.accepted_tokens[b, length + 1 :] == PAD).all()
        # a non-finite judge logit never lets a mismatch through
        for n in nodes:
            if not np.isfinite(logit[b, n]):
                parent = paths[b, p, list(paths[b, p]).index(n) - 1]
                assert draft_tokens[b, n - 1] == target_argmax[b, parent]


@settings(max_examples=200, deadline=None)
@given(random_case())
def test_relaxing_never_shortens_and_lossless_judges_nothing(case):
    draft_tokens, target_argmax, paths, relaxed, draft_lens, _ = case
    lossless = accept_tree(draft_tokens, target_argmax, paths, None, draft_lens)
    judged = accept_tree(draft_tokens, target_argmax, paths, relaxed, draft_lens)
    assert (lossless.judged_count == 0).all()
    assert (judged.accepted_len >= lossless.accepted_len).all()
    everything = np.ones_like(relaxed)
    everything[:, 0] = False
    full = accept_tree(draft_tokens, target_argmax, paths, everything, draft_lens)
    depth = (paths[:, :, 1:] > 0) & (paths[:, :, 1:] <= draft_lens[:, None, None])
    assert (full.accepted_len == np.cumprod(depth, 2).sum(2).max(1)).all()  # the deepest valid path, whole

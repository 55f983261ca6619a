"""Baseline relaxed rules (top-K, typical, MTP relaxed) on crafted target distributions."""
import numpy as np
import pytest

from trtllm_autojudge.decoding.rules import limit_judged, mtp_relaxed, topk_relaxed, typical_relaxed
from trtllm_autojudge.decoding.tree import DraftTree


def logits_for(probs):  # [B, N+1, V] logits whose softmax is probs
    return np.log(np.asarray(probs, np.float64))


PARENTS = np.asarray(DraftTree.chain(3).parents)[None]  # [1, 4]
# target distribution at each node (node 3 is a leaf: its row is never a parent)
PROBS = [[[0.5, 0.3, 0.15, 0.05], [0.97, 0.01, 0.01, 0.01], [0.25, 0.25, 0.25, 0.25], [1, 1, 1, 1]]]
PROBS = np.asarray(PROBS) / np.asarray(PROBS).sum(-1, keepdims=True)


def test_topk():
    # node 1: 3rd most likely at the root; node 2: tied 2nd at node 1; node 3: a four-way tie at node 2
    draft = np.array([[2, 1, 3]])
    assert topk_relaxed(logits_for(PROBS), draft, PARENTS, 2).tolist() == [[False, False, True, True]]
    assert topk_relaxed(logits_for(PROBS), draft, PARENTS, 3).tolist() == [[False, True, True, True]]
    assert topk_relaxed(logits_for(PROBS), draft, PARENTS, 1).tolist() == [[False, False, False, True]]  # ties count
    with pytest.raises(ValueError, match="k >= 1"):
        topk_relaxed(logits_for(PROBS), draft, PARENTS, 0)


def test_typical():
    draft = np.array([[1, 1, 0]])
    # root: entropy high -> cut min(0.09, 0.3 e^-H) ; p=0.3 passes. node1: near-certain -> cut 0.09 > p=0.01
    r = typical_relaxed(logits_for(PROBS), draft, PARENTS, posterior_threshold=0.09, alpha=0.3)
    assert r.tolist() == [[False, True, False, True]]


def test_mtp_relaxed():
    draft = np.array([[1, 1, 0]])
    r = mtp_relaxed(logits_for(PROBS), draft, PARENTS, relaxed_topk=4, relaxed_delta=0.25)
    assert r.tolist() == [[False, True, False, True]]  # 0.3 >= 0.5 - 0.25; 0.01 < 0.97 - 0.25; tie at node 2
    r = mtp_relaxed(logits_for(PROBS), draft, PARENTS, relaxed_topk=1, relaxed_delta=0.25)
    assert r.tolist() == [[False, False, False, True]]


def test_token_outside_vocabulary():
    with pytest.raises(ValueError, match="outside the vocabulary"):
        topk_relaxed(logits_for(PROBS), np.array([[2, 9, 0]]), PARENTS, 2)


@pytest.mark.parametrize("tree", [DraftTree.chain(6), DraftTree.static([2, 2, 1]), DraftTree.static([3, 1, 2])],
                         ids=lambda t: f"N{t.num_nodes}-D{t.max_depth}")
def test_limit_judged_keeps_the_first_relaxed_nodes_of_every_path(tree):
    """Against a count along each node's path, written out per node, on random masks and limits."""
    rng = np.random.default_rng(0)
    parents = np.tile(np.asarray(tree.parents), (5, 1))  # [B, N+1]
    for _ in range(20):
        relaxed = rng.random(parents.shape) < 0.5
        relaxed[:, 0] = False
        remaining = rng.integers(-1, 4, size=5)  # [B]
        out = limit_judged(relaxed, parents, remaining)
        for b in range(5):
            for n in range(tree.num_nodes + 1):
                on_path = sum(relaxed[b, m] for m in tree.path_to(n))
                assert out[b, n] == (relaxed[b, n] and on_path <= remaining[b])
    assert not limit_judged(relaxed, parents, 0).any()
    with pytest.raises(ValueError, match=r"both be \[B, N\+1\]"):
        limit_judged(relaxed[:, 1:], parents, 1)

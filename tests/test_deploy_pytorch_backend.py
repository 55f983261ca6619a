"""PyTorch-backend integration, the part without TensorRT-LLM: the batched judged acceptance that
replaces TorchSampler's greedy/tree walk, its row layout, and a TorchSampler-style drive of it."""
import numpy as np
import pytest
import torch

from tiny_models import EOS, VOCAB, tiny_pair
from trtllm_autojudge.decoding.modes import JudgeRule
from trtllm_autojudge.decoding.speculative import propose, speculative_generate, verify
from trtllm_autojudge.decoding.tree import DraftTree
from trtllm_autojudge.judge.head import JudgeHead
from trtllm_autojudge.trt.pytorch.backend import (JudgeScorer, accept_requests, batch_paths,
                                                  generation_row_offsets, node_row_index, step_tokens)



def op_available() -> bool:
    try:
        from trtllm_autojudge.ops.torch_ops import accept  # noqa: F401
        from trtllm_autojudge.ops.host_library import host_core

        host_core()
        return True
    except Exception:  # the host core is not built (no compiler): the reference path still runs
        return False


MODES = [False, pytest.param(True, marks=pytest.mark.skipif(not op_available(),
                                                            reason="torch.ops.autojudge host core not built"))]


def dt_head(H=8, seed=1, threshold=0.4):
    rng = np.random.default_rng(seed)
    return JudgeHead(rng.normal(size=H), rng.normal(size=H), rng.uniform(1, 2, size=H), 0.1, "DT", 4, H,
                     threshold=threshold)


def test_row_layout():
    assert generation_row_offsets(3, [4, 0, 2]) == [3, 8, 9]
    index, N = node_row_index([3, 8, 9], [4, 0, 2])
    assert N == 4 and index.reshape(3, 5).tolist() == [[3, 4, 5, 6, 7], [8, 8, 8, 8, 8], [9, 10, 11, 9, 9]]
    paths = batch_paths([2, 3], [None, np.array([[0, 1, 3], [0, 2, -1]])])
    assert paths.tolist() == [[[0, 1, 2], [-1, -1, -1]], [[0, 1, 3], [0, 2, -1]]]


@pytest.mark.parametrize("use_op", MODES)
def test_batch_acceptance_of_a_step(use_op):
    """Two requests of one step: a chain whose middle mismatch the judge lets through, and a tree."""
    head = dt_head()
    scorer = JudgeScorer(head, threshold=0.5)
    V, H = 12, 8
    logits = torch.full((1 + 4 + 5, V), -5.0)  # one context row, then 1+3 and 1+4 generation rows
    hidden = torch.zeros(10, H)
    for row, tok in {1: 5, 2: 9, 3: 7, 4: 8, 5: 3, 6: 4, 7: 0, 8: 1, 9: 2}.items():
        logits[row, tok] = 5.0  # target argmax per row
    w = torch.from_numpy(head.folded()[0]).double()
    direction = (w / w.dot(w)).float()
    hidden[3] = direction * (-50.0 - head.folded()[1])  # node 2 of request 0: judge logit -50 (unimportant)
    # every other row has hidden 0: judge logit c = 0.1... > logit(0.5) = 0, important (rejected)
    assert head.folded()[1] > 0
    offsets = generation_row_offsets(1, [3, 4])
    index, N = node_row_index(offsets, [3, 4])
    draft = np.array([[5, 6, 7, 0], [3, 11, 4, 1]])  # request 0: 6 != 9 at node 2; request 1: tree below
    tree = np.array([[0, 1, 3, -1], [0, 2, 4, -1]])  # node1=3 (after root), node2=11, node3=4 (after 1), node4=1 (after 2)
    paths = batch_paths([3, 4], [None, tree])
    acc = accept_requests(scorer, logits, hidden, index, draft, np.array([3, 4]), paths, np.array([0.5, 0.5]), use_op)
    s0, s1 = step_tokens(acc, 0, paths), step_tokens(acc, 1, paths)
    assert (s0.tokens, s0.rows, s0.accepted, s0.judged) == ([5, 6, 7, 8], [0, 1, 2, 3], 3, 1)
    assert (s1.tokens, s1.rows, s1.accepted, s1.judged) == ([3, 4, 1], [0, 1, 3], 2, 0)
    lossless = accept_requests(scorer, logits, hidden, index, draft, np.array([3, 4]), paths, np.zeros(2), use_op)
    assert step_tokens(lossless, 0, paths).tokens == [5, 9]  # the exact-match walk stops at node 2


def test_scorer_refuses_other_setups():
    with pytest.raises(ValueError, match="DT judges"):
        JudgeScorer(JudgeHead(np.ones(12), np.zeros(12), np.ones(12), 0.0, "DD-DT", 4, 8))
    with pytest.raises(ValueError, match="threshold"):
        JudgeScorer(dt_head(), threshold=2.0)


@pytest.mark.parametrize("use_op", MODES)
@pytest.mark.parametrize("tree", [DraftTree.chain(4), DraftTree.static([2, 2])], ids=["chain", "tree"])
def test_sampler_drive_reproduces_the_reference_loop(tree, use_op):
    """Drive the acceptance the way TorchSampler does: per step, the logits rows and the LM head's
    input rows of each request; the judged step then decides the tokens to append."""
    target, draft = tiny_pair(seed=0)
    rng = np.random.default_rng(2)
    head = JudgeHead(rng.normal(size=64), np.zeros(64), np.ones(64), 0.0, "DT", 64, 64)
    scorer = JudgeScorer(head, threshold=0.5)
    prompt = rng.integers(3, VOCAB, size=6).tolist()
    ref = speculative_generate(target, draft, prompt, tree=tree, rule=JudgeRule(head, 0.5), max_new_tokens=20)
    tokens, judged, N = list(prompt), 0, tree.num_nodes
    paths = batch_paths([N], [tree.paths])
    while len(tokens) - len(prompt) < 20 and tokens[-1] != EOS:
        node_tokens = propose(draft.session(), tokens, tree).node_tokens
        logits, hidden, _ = verify(target.session(), tokens, tree, node_tokens)  # [N+1, V], [N+1, H]
        index, _ = node_row_index([0], [N])
        acc = accept_requests(scorer, logits, hidden, index, node_tokens[None], np.array([N]), paths, np.array([0.5]),
                              use_op)
        step = step_tokens(acc, 0, paths)
        judged += step.judged
        for t in step.tokens[: 20 - (len(tokens) - len(prompt))]:
            tokens.append(t)
            if t == EOS:
                break
    assert tokens[len(prompt):] == ref.tokens
    assert judged == sum(c.judged for c in ref.cycles) and judged > 0

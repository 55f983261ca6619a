"""PyTorch-backend integration, the part without TensorRT-LLM: the judged acceptance step that
replaces TorchSampler's greedy/tree walk, and the logits row layout it reads."""
import numpy as np
import pytest
import torch

from tiny_models import EOS, VOCAB, tiny_pair
from trtllm_autojudge.backends.pytorch_backend import JudgeScorer, generation_row_offsets, judged_step
from trtllm_autojudge.decoding.modes import JudgeRule
from trtllm_autojudge.decoding.speculative import propose, speculative_generate, verify
from trtllm_autojudge.decoding.tree import DraftTree
from trtllm_autojudge.judge.head import JudgeHead


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    """Tiny models run fastest on one thread; on a shared 2-core machine two threads spin-wait."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def greedy_walk(draft, target):
    """TorchSampler._process_draft_tokens_greedy's result: target tokens up to the first mismatch."""
    out = [target[0]]
    for i, d in enumerate(draft):
        if d != out[-1]:
            break
        out.append(target[i + 1])
    return out


def test_lossless_step_is_the_greedy_walk():
    rng = np.random.default_rng(0)
    for _ in range(200):
        k = int(rng.integers(1, 7))
        draft = rng.integers(0, 4, size=k).tolist()
        target = rng.integers(0, 4, size=k + 1).tolist()
        step = judged_step(draft, target, None)
        assert step.tokens == greedy_walk(draft, target)
        assert step.rows == list(range(len(step.tokens))) and step.judged == 0 and not any(step.judged_flags)


def test_judged_step_chain_and_tree():
    step = judged_step([5, 6, 7], [5, 9, 7, 8], np.array([0, 0, 1, 0], bool))
    assert step.tokens == [5, 6, 7, 8] and step.rows == [0, 1, 2, 3]  # token 6 written over row 1's target 9
    assert (step.accepted, step.judged, step.judged_flags) == (3, 1, [False, True, False, False])
    # eagle paths [P, D+1]: node 1 -> 3, node 2 -> 4; the target takes the second branch
    paths = np.array([[0, 1, 3], [0, 2, 4]])
    step = judged_step([10, 20, 11, 21], [20, -5, 21, -5, 30], None, paths)
    assert step.tokens == [20, 21, 30] and step.rows == [0, 2, 4]
    # with the judge letting node 1's mismatch through, both paths have length 2: fewer judged wins
    step = judged_step([10, 20, 11, 21], [20, 11, 21, -5, 30], np.array([0, 1, 0, 0, 0], bool), paths)
    assert step.tokens == [20, 21, 30] and step.judged == 0


def test_generation_rows_follow_context_rows():
    assert generation_row_offsets(3, [4, 0, 2]) == [3, 8, 9]


def test_scorer_matches_the_judge_head():
    rng = np.random.default_rng(1)
    head = JudgeHead(rng.normal(size=8), rng.normal(size=8), rng.uniform(1, 2, size=8), 0.1, "DT", 4, 8, threshold=0.4)
    hidden = torch.from_numpy(rng.normal(size=(5, 8)))
    logit = head.logits(hidden.numpy())
    relaxed = JudgeScorer(head).relaxed(hidden)
    assert not relaxed[0]  # the root is never a judged node
    np.testing.assert_array_equal(relaxed[1:], logit[1:] < np.log(0.4 / 0.6))
    assert not JudgeScorer(head, threshold=0.0).relaxed(hidden).any()
    with pytest.raises(ValueError, match="DT judges"):
        JudgeScorer(JudgeHead(np.ones(12), np.zeros(12), np.ones(12), 0.0, "DD-DT", 4, 8))
    with pytest.raises(ValueError, match=r"\[N\+1, 8\]"):
        JudgeScorer(head).relaxed(torch.zeros(3, 5))


@pytest.mark.parametrize("tree", [DraftTree.chain(4), DraftTree.static([2, 2])], ids=["chain", "tree"])
def test_sampler_step_reproduces_the_reference_loop(tree):
    """Drive the step the way TorchSampler does: per cycle, target tokens per row (new_tokens) and the
    LM head's input rows (the captured hidden states); the judged step then decides the tokens."""
    target, draft = tiny_pair(seed=0)
    rng = np.random.default_rng(2)
    head = JudgeHead(rng.normal(size=64), np.zeros(64), np.ones(64), 0.0, "DT", 64, 64)
    scorer = JudgeScorer(head, threshold=0.5)
    prompt = rng.integers(3, VOCAB, size=6).tolist()
    ref = speculative_generate(target, draft, prompt, tree=tree, rule=JudgeRule(head, 0.5), max_new_tokens=20)
    tokens, judged = list(prompt), 0
    while len(tokens) - len(prompt) < 20:
        node_tokens, _, _, _ = propose(draft.session(), tokens, tree, False)
        logits, hidden, _ = verify(target.session(), tokens, tree, node_tokens)  # [N+1, V], [N+1, H]
        new_tokens = logits.argmax(-1).tolist()  # what TorchSampler samples per row
        step = judged_step(node_tokens.tolist(), new_tokens, scorer.relaxed(hidden), tree.paths)
        judged += step.judged
        for t in step.tokens[: 20 - (len(tokens) - len(prompt))]:
            tokens.append(t)
            if t == EOS:
                break
        if tokens[-1] == EOS:
            break
    assert tokens[len(prompt):] == ref.tokens
    assert judged == sum(c.judged for c in ref.cycles) and judged > 0

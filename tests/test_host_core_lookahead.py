"""The compiled judge for any setup of the blocks DT, DD, DT1, DT2, DD1, LS (the host core, which runs
the accept_core.h functions the CUDA kernels run) against the Python rule: JudgeRule + accept_tree
(tests/lookahead_reference.py), on random chains (shorter than 3 included) and trees in fp32, fp16
and bf16, with nodes without a verdict, draft lengths below N, NaN / inf / -inf rows, vocabularies
up to 128256 and judge logits at the cut; in accept mode and in logits mode; and the vocabulary of
the blocks, pinned equal on both sides.

The core accumulates in float32 and the rule in float64 (LS in float32 on both): judge logits are
compared within a tolerance, decisions exactly given the same float32 judge logits (at the cut), and
end to end with thresholds in wide gaps of the judge logits."""
import shutil
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch

from trtllm_autojudge.decoding.tree import DraftTree
from trtllm_autojudge.judge.head import feature_dim
from trtllm_autojudge.judge.lookahead import lookahead_scores
from trtllm_autojudge.spec import packed_step
from trtllm_autojudge.spec.judge_blocks import (BLOCK_CODES, LOOKAHEAD_SCORES, MIN_LOG_PROB, WINDOW_TOKENS_AFTER,
                                                reads_draft)

sys.path.insert(0, str(Path(__file__).resolve().parent))
import lookahead_reference as ref  # noqa: E402
import packed_steps  # noqa: E402

pytestmark = [
    pytest.mark.skipif(shutil.which("cmake") is None or (shutil.which("c++") is None and shutil.which("g++") is None),
                       reason="needs cmake and a C++ compiler to build libautojudge_host.so"),
    pytest.mark.filterwarnings("ignore:invalid value encountered in matmul"),  # the rule on NaN rows: no verdict
]

SETUPS = ["DD-DT-DT1-DT2-DD1-LS", "DT-DT1-DT2-LS", "LS-DT", "DT1-DD", "DD1-DT2", "DT", "DD-DT"]
HT, HD = 24, 16
DTYPES = ("float32", "float16", "bfloat16")


@pytest.fixture(scope="module")
def core():
    from trtllm_autojudge.ops.host_library import host_core
    return host_core()


def test_the_block_vocabulary_is_one_table(core):
    """Names, codes and draft tokens needed after the node: the C++ FeatureBlock table == spec/judge_blocks.py."""
    for name, code in BLOCK_CODES.items():
        assert core.feature_block(code) == (name, WINDOW_TOKENS_AFTER.get(name, 0))
    assert core.feature_block(len(BLOCK_CODES)) is None and core.feature_block(-1) is None
    assert len(LOOKAHEAD_SCORES) == 6 and feature_dim("LS", HD, HT) == len(LOOKAHEAD_SCORES)


class Case:
    """One batch of one draft tree: the core's arrays (bf16 as uint16 bits) and the rule's tensors."""

    def __init__(self, rng: np.random.Generator, setup: str, dtype: str, tree: DraftTree, batch: int, vocab: int,
                 special_rows: bool = True, min_run: int = 1, follow_share: float = 0.3):
        self.setup, self.tree = setup, tree
        N = tree.num_nodes
        rows = batch * (N + 1)
        logits = (rng.normal(size=(rows, vocab)) * 2).astype(np.float32)
        hidden = rng.normal(size=(rows, HT)).astype(np.float32)
        draft = rng.normal(size=(rows, HD)).astype(np.float32)
        target_argmax = np.argmax(logits, 1).reshape(batch, N + 1)
        follow = rng.random((batch, N)) < follow_share
        parents = np.asarray(tree.parents[1:], np.int64)
        self.draft_tokens = np.where(follow, target_argmax[:, parents], rng.integers(0, vocab, (batch, N)))
        if special_rows and rows > 2:
            for row in rng.choice(rows, size=min(rows, int(rng.integers(0, 4))), replace=False):
                kind = rng.integers(5)
                if kind == 0:
                    logits[row, rng.integers(vocab)] = np.nan
                elif kind == 1:
                    logits[row, rng.integers(vocab)] = np.inf
                elif kind == 2:
                    logits[row] = -np.inf
                elif kind == 3:  # masked tokens, the draft's among them (log p floored at MIN_LOG_PROB)
                    logits[row, rng.integers(vocab, size=vocab // 3 + 1)] = -np.inf
                    logits[row, self.draft_tokens.reshape(-1)] = -np.inf
                    logits[row, rng.integers(vocab)] = 1.0  # keeps a finite maximum
                else:
                    hidden[row, rng.integers(HT)] = np.nan
            deepest = [n for n in range(1, N + 1) if tree.depths[n] == tree.max_depth]
            draft[[b * (N + 1) + n for b in range(batch) for n in deepest]] = np.nan  # never fed for lookahead judges
        self.draft_lens = rng.choice([N, int(rng.integers(0, N + 1)), max(N - 1, 0)], size=batch)
        F = feature_dim(setup, HD, HT)
        self.weight = (rng.normal(size=F) * 3 / np.sqrt(F)).astype(np.float32)
        self.bias = float(rng.normal())
        self.paths = np.stack([tree.paths] * batch)
        self.greedy_child = np.stack([tree.greedy_child] * batch)
        if dtype == "bfloat16":  # bfloat16 bits, and their exact values for the rule
            bits = [(np.ascontiguousarray(a).view(np.uint32) >> 16).astype(np.uint16) for a in (logits, hidden, draft)]
            self.arrays = bits
            self.tensors = [torch.from_numpy((b.astype(np.uint32) << 16).view(np.float32)).bfloat16() for b in bits]
        else:
            self.arrays = [a.astype(dtype) for a in (logits, hidden, draft)]
            self.tensors = [torch.from_numpy(a) for a in self.arrays]
        self.head = ref.judge_head(setup, self.weight, self.bias, HT, HD, min_run)

    def mismatch_everywhere(self) -> None:
        """Every node's draft token differs from its parent's target argmax; draft lengths N."""
        B, N = self.draft_tokens.shape
        target_argmax = self.tensors[0].float().argmax(-1).reshape(B, N + 1).numpy()
        parents = np.asarray(self.tree.parents[1:], np.int64)
        self.draft_tokens = (target_argmax[:, parents] + 1) % self.tensors[0].shape[1]
        self.draft_lens[:] = N

    def core_judge(self, core):
        logits, hidden, draft = self.arrays
        looks_ahead = self.head.lookahead > 0
        return core.judge_nodes(logits, hidden, self.draft_tokens, self.paths, self.weight, self.bias, self.setup,
                                draft if reads_draft(self.setup) else None,
                                self.greedy_child if looks_ahead else None, self.draft_lens, self.head.min_run)

    def rule_judge(self) -> np.ndarray:  # [B, N+1]
        logits, hidden, draft = self.tensors
        return ref.tree_judge_logits(self.head, self.tree, logits, hidden, draft if reads_draft(self.setup) else None,
                                     self.draft_tokens, self.draft_lens)


def random_tree(rng: np.random.Generator) -> DraftTree:
    kind = rng.integers(3)
    if kind == 0:
        return DraftTree.chain(int(rng.integers(0, 13)))  # chains shorter than 3 have no verdict at all
    if kind == 1:
        return DraftTree.static([int(w) for w in rng.integers(1, 3, size=rng.integers(1, 6))])
    n = int(rng.integers(1, 24))
    return ref.ranked_tree([-1] + [int(rng.integers(0, i)) for i in range(1, n + 1)])


def assert_close_logits(got: np.ndarray, want: np.ndarray, context: str) -> int:
    """The same nodes scored (finite), within float32 accumulation; returns how many were finite."""
    np.testing.assert_array_equal(np.isfinite(got), np.isfinite(want), err_msg=f"scored nodes, {context}")
    finite = np.isfinite(want)
    np.testing.assert_allclose(got[finite], want[finite], rtol=1e-4, atol=2e-3, err_msg=context)
    return int(finite.sum())


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("setup", SETUPS)
def test_judge_logits_equal_the_rule_on_random_chains_and_trees(core, setup, dtype):
    rng = np.random.default_rng([SETUPS.index(setup), DTYPES.index(dtype)])
    scored = unscored = 0
    for case in range(60):
        c = Case(rng, setup, dtype, random_tree(rng), int(rng.integers(1, 4)), int(rng.integers(2, 40)))
        argmax, got = c.core_judge(core)
        want = c.rule_judge()
        np.testing.assert_array_equal(argmax.reshape(-1), c.tensors[0].float().argmax(-1).numpy(),
                                      err_msg=f"case {case}")
        scored += assert_close_logits(got, want, f"case {case} setup {setup} tree {c.tree.parents}")
        unscored += int(np.isinf(want[:, 1:]).sum())
        if c.tree.is_chain and c.head.lookahead and c.tree.num_nodes <= c.head.lookahead:
            assert np.isinf(got).all(), "a chain shorter than the lookahead + 1 has no verdict"
    assert scored > 50 and unscored > 50, (scored, unscored)


@pytest.mark.parametrize("dtype", DTYPES)
def test_vocabulary_of_128256(core, dtype):
    rng = np.random.default_rng(128256 + DTYPES.index(dtype))
    c = Case(rng, "DD-DT-DT1-DT2-DD1-LS", dtype, DraftTree.chain(5), 2, 128256, special_rows=False)
    c.mismatch_everywhere()  # nodes 1..3 of each chain have a verdict
    _, got = c.core_judge(core)
    assert assert_close_logits(got, c.rule_judge(), dtype) == 6


def test_lookahead_scores_in_order(core):
    """A setup of LS alone with one-hot weights gives each score: the six of lookahead_scores, in order,
    log-probabilities floored at MIN_LOG_PROB."""
    rng = np.random.default_rng(3)
    tree = DraftTree.chain(4)
    for floor in (False, True):
        c = Case(rng, "LS", "float32", tree, 1, 300, special_rows=False)
        c.draft_tokens[0], c.draft_lens[0] = [7, 8, 9, 10], 4
        logits = c.arrays[0]
        logits[[0, 1, 2], 0] = 20.0  # node n's row predicts token 0: every node mismatches
        if floor:
            logits[1, 8] = -80.0  # log p of node 1's c1 (token 8) after node 1: below the floor
        torch_logits = torch.from_numpy(logits)
        c.tensors[0] = torch_logits
        for k in range(6):
            c.weight[:] = 0
            c.weight[k] = 1
            _, got = c.core_judge(core)
            rows = torch.tensor([1, 2])  # nodes 1 and 2 have c1 and c2
            want = lookahead_scores(torch_logits, rows, rows + 1, torch.tensor([8, 9]), torch.tensor([9, 10]))[:, k]
            np.testing.assert_allclose(got[0, 1:3] - c.bias, want.numpy(), rtol=1e-5, atol=1e-4,
                                       err_msg=LOOKAHEAD_SCORES[k])
            assert np.isinf(got[0, [0, 3, 4]]).all()
        if floor:
            c.weight[:] = 0
            c.weight[0] = 1
            assert c.core_judge(core)[1][0, 1] - c.bias == pytest.approx(MIN_LOG_PROB)


@pytest.mark.parametrize("setup", ["DD-DT-DT1-DT2-DD1-LS", "DT-LS", "DD-DT"])
def test_decisions_at_the_cut_equal_accept_tree(core, setup):
    """Given the core's float32 judge logits, thresholds AT those logits (and 0 and 1): the core's walk
    == accept_tree + judge_relaxed, token for token."""
    rng = np.random.default_rng(SETUPS.index(setup) if setup in SETUPS else 99)
    judged = 0
    for case in range(150):
        c = Case(rng, setup, str(rng.choice(DTYPES)), random_tree(rng), int(rng.integers(1, 5)), 6)
        argmax, judge_logit = c.core_judge(core)
        threshold = np.empty(len(argmax), np.float32)
        for b, row in enumerate(judge_logit):
            finite = row[np.isfinite(row)]
            choices = [0.0, 1.0] + ([float(1 / (1 + np.exp(-rng.choice(finite))))] * 3 if finite.size else [])
            threshold[b] = rng.choice(choices)
        got = core.accept_tree(c.draft_tokens, argmax, c.paths, judge_logit, threshold, c.draft_lens)
        want = ref.accept(judge_logit, threshold, c.draft_tokens, argmax, c.paths, c.draft_lens)
        for name in ("accepted_len", "best_path", "judged_count", "accepted_tokens"):
            np.testing.assert_array_equal(getattr(got, name), getattr(want, name), err_msg=f"{name}, case {case}")
        judged += int(got.judged_count.sum())
    assert judged > 20


@pytest.mark.parametrize("setup", ["DD-DT-DT1-DT2-DD1-LS", "DT-DT1-DT2-LS", "DT1-DD"])
@pytest.mark.parametrize("torch_dtype", [torch.float32, torch.bfloat16])
def test_torch_op_equals_judge_rule_and_accept_tree(setup, torch_dtype):
    """torch.ops.autojudge.accept on CPU tensors (the host core) == JudgeRule + accept_tree, end to end,
    with each sequence's threshold in a wide gap of the rule's judge logits."""
    from trtllm_autojudge.ops.torch_ops import accept
    dtype = "bfloat16" if torch_dtype == torch.bfloat16 else "float32"
    rng = np.random.default_rng(len(setup))
    judged = 0
    for case in range(60):
        c = Case(rng, setup, dtype, random_tree(rng), int(rng.integers(1, 5)), 12)
        want_logits = c.rule_judge()
        threshold = np.array([ref.cut_in_a_gap(row, 1e-2) for row in want_logits], np.float32)
        target_argmax = c.tensors[0].float().argmax(-1).reshape(want_logits.shape).numpy()
        want = ref.accept(want_logits, threshold, c.draft_tokens, target_argmax, c.paths, c.draft_lens)
        logits, hidden, draft = c.tensors
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # short chains: said once, tested below
            got = accept(logits, hidden, torch.from_numpy(c.draft_tokens), torch.from_numpy(c.draft_lens),
                         torch.from_numpy(c.paths), torch.from_numpy(threshold), torch.from_numpy(c.weight), c.bias,
                         draft if reads_draft(setup) else None, setup,
                         torch.from_numpy(c.greedy_child) if c.head.lookahead else None)
        np.testing.assert_array_equal(got.accepted_tokens.numpy(), want.accepted_tokens, err_msg=f"case {case}")
        np.testing.assert_array_equal(got.judged_count.numpy(), want.judged_count, err_msg=f"case {case}")
        judged += int(want.judged_count.sum())
    assert judged > 10


def test_paths_too_short_for_a_verdict_are_said_once():
    from trtllm_autojudge.ops.torch_ops import accept
    c = Case(np.random.default_rng(0), "DT-LS", "float32", DraftTree.chain(2), 1, 10, special_rows=False)
    c.mismatch_everywhere()
    args = [torch.from_numpy(a) for a in (c.arrays[0], c.arrays[1], c.draft_tokens, c.draft_lens, c.paths)]
    with pytest.warns(UserWarning, match="needs 2 draft tokens after a node .* paths of at most 2"):
        out = accept(*args, 1.0, torch.from_numpy(c.weight), -50.0, None, "DT-LS", torch.from_numpy(c.greedy_child))
    assert out.accepted_lens.tolist() == [0] and out.judged_count.tolist() == [0]  # no verdict even at threshold 1
    with pytest.raises(ValueError, match="give greedy_child"):
        accept(*args, 1.0, torch.from_numpy(c.weight), 0.0, None, "DT-LS")
    with pytest.raises(ValueError, match=r"judge_weight must be \[30\]"):
        accept(*args, 1.0, torch.from_numpy(c.weight[:-1]), 0.0, None, "DT-LS", torch.from_numpy(c.greedy_child))


# ---------------------------------------------------------------------------------------------
# Logits mode: a sequence's draft rows are a chain, its lookahead rows the next draft rows.

def packed_case(rng: np.random.Generator, setup: str, dtype: str, vocab: int):
    step = packed_steps.random_step(rng, vocab)
    L = len(step.last_token_ids)
    logits = (rng.normal(size=(L, vocab)) * 2).astype(np.float32)
    packed_steps.steer_drafts(step, np.argmax(logits, 1), rng, share=0.4)
    hidden = rng.normal(size=(L, HT)).astype(np.float32)
    draft = rng.normal(size=(L, HD)).astype(np.float32)
    if L > 1:
        logits[rng.integers(L), rng.integers(vocab)] = np.nan
        logits[rng.integers(L)] = -np.inf
    if dtype == "bfloat16":
        arrays = [(np.ascontiguousarray(a).view(np.uint32) >> 16).astype(np.uint16) for a in (logits, hidden, draft)]
        tensors = [torch.from_numpy((a.astype(np.uint32) << 16).view(np.float32)).bfloat16() for a in arrays]
    else:
        arrays = [a.astype(dtype) for a in (logits, hidden, draft)]
        tensors = [torch.from_numpy(a) for a in arrays]
    F = feature_dim(setup, HD, HT)
    weight = (rng.normal(size=F) * 3 / np.sqrt(F)).astype(np.float32)
    return step, arrays, tensors, weight, float(rng.normal())


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("setup", ["DD-DT-DT1-DT2-DD1-LS", "DT-DT1-DT2-LS", "DT"])
def test_packed_judge_logits_equal_the_rule_and_the_rewrite_equals_the_reference(core, setup, dtype):
    rng = np.random.default_rng([7, DTYPES.index(dtype), len(setup)])
    scored = rewritten = 0
    for case in range(150):
        step, (logits, hidden, draft), tensors, weight, bias = packed_case(rng, setup, dtype, 9)
        if case % 4 == 3:
            step = packed_steps.corrupt(step, rng, 9)
            if len(step.last_token_ids) != len(logits):
                continue  # a row added or removed: the rows no longer fit the logits
        sequences = (step.input_ids, step.last_token_ids, step.request_types, step.host_context_lengths)
        head = ref.judge_head(setup, weight, bias, HT, HD)
        with_draft = reads_draft(setup)
        try:
            want = ref.packed_judge_logits(head, tensors[0], tensors[1], tensors[2] if with_draft else None, *sequences)
        except packed_step.StepMismatch:
            with pytest.raises(packed_step.StepMismatch):
                core.judge_rows(logits, hidden, *sequences, weight, bias, setup, draft if with_draft else None)
            continue
        argmax, got = core.judge_rows(logits, hidden, *sequences, weight, bias, setup, draft if with_draft else None)
        scored += assert_close_logits(got, want, f"case {case} {step.corrupted}")
        threshold = ref.cut_in_a_gap(want, 1e-2)
        out = core.rewrite_logits(logits, argmax, got, *sequences, threshold)
        np.testing.assert_array_equal(out, packed_step.rewrite_logits(logits, argmax, want, *sequences, threshold),
                                      err_msg=f"case {case} {step.corrupted}")
        rewritten += int((out != logits).any(axis=1).sum())
    assert scored > 30 and rewritten > 10, (scored, rewritten)


# ---------------------------------------------------------------------------------------------
# The judge's minimum run (accept_core.h "minimum run"; decoding/modes.py JudgeRule.judgeable).

@pytest.mark.parametrize("min_run", [1, 3, 5])
@pytest.mark.parametrize("setup", ["DT", "DT-DT1-DT2-LS", "DD-DT"])
def test_min_run_scores_and_accepts_as_the_rule(core, setup, min_run):
    """With a minimum run, the core scores exactly the nodes JudgeRule.judgeable keeps (within float32),
    its walk given those logits equals accept_tree, the walk given the logits of every mismatch with
    min_run applies the minimum itself, and torch.ops.autojudge.accept equals the rule end to end. A
    minimum run above 1 removes judged acceptances the same judge makes without it."""
    from trtllm_autojudge.ops.torch_ops import accept
    rng = np.random.default_rng([min_run, len(setup)])
    scored = removed = lost = 0
    for case in range(50):
        tree = [DraftTree.chain(int(rng.integers(3, 16))), DraftTree.static([2, 2, 1, 1]), random_tree(rng)][case % 3]
        c = Case(rng, setup, str(rng.choice(DTYPES)), tree, int(rng.integers(1, 4)), 6, min_run=min_run,
                 follow_share=0.75)
        argmax, got = c.core_judge(core)
        want = c.rule_judge()
        scored += assert_close_logits(got, want, f"case {case} tree {tree.parents}")
        _, every = core.judge_nodes(*c.arrays[:2], c.draft_tokens, c.paths, c.weight, c.bias, setup,
                                    c.arrays[2] if reads_draft(setup) else None,
                                    c.greedy_child if c.head.lookahead else None, c.draft_lens)  # min_run 1
        assert not (np.isfinite(got) & ~np.isfinite(every)).any()
        removed += int((np.isfinite(every) & ~np.isfinite(got)).sum())
        threshold = np.array([ref.cut_in_a_gap(row, 1e-2) for row in every], np.float32)
        want_acc = ref.accept(every, threshold, c.draft_tokens, argmax, c.paths, c.draft_lens, min_run)
        for logits_in in (got, every):  # masked by the scoring, or by the walk's own minimum run
            got_acc = core.accept_tree(c.draft_tokens, argmax, c.paths, logits_in, threshold, c.draft_lens, min_run)
            for name in ("accepted_len", "best_path", "judged_count", "accepted_tokens"):
                np.testing.assert_array_equal(getattr(got_acc, name), getattr(want_acc, name), err_msg=f"{name} {case}")
        free = ref.accept(every, threshold, c.draft_tokens, argmax, c.paths, c.draft_lens)
        lost += int(free.judged_count.sum() - want_acc.judged_count.sum())
        rule_threshold = np.array([ref.cut_in_a_gap(row, 1e-2) for row in want], np.float32)
        target_argmax = c.tensors[0].float().argmax(-1).reshape(want.shape).numpy()
        rule = ref.accept(want, rule_threshold, c.draft_tokens, target_argmax, c.paths, c.draft_lens)
        logits, hidden, draft = c.tensors
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            op = accept(logits, hidden, torch.from_numpy(c.draft_tokens), torch.from_numpy(c.draft_lens),
                        torch.from_numpy(c.paths), torch.from_numpy(rule_threshold), torch.from_numpy(c.weight), c.bias,
                        draft if reads_draft(setup) else None, setup,
                        torch.from_numpy(c.greedy_child) if c.head.lookahead else None, min_run)
        np.testing.assert_array_equal(op.accepted_tokens.numpy(), rule.accepted_tokens, err_msg=f"op, case {case}")
        np.testing.assert_array_equal(op.judged_count.numpy(), rule.judged_count, err_msg=f"op, case {case}")
    assert scored > 5, scored
    if min_run == 1:
        assert removed == 0 and lost == 0
    else:
        assert removed > 10 and lost > 0, (removed, lost)


@pytest.mark.parametrize("min_run", [1, 3, 5])
def test_min_run_in_logits_mode_equals_the_rule(core, min_run):
    """Logits mode: judge_rows with a minimum run scores the rows JudgeRule.judgeable keeps on each
    sequence's chain, and rewrite_logits given every mismatch's logit applies the minimum itself: it
    equals the reference rewrite of the rule's logits. A minimum run above 1 rewrites fewer rows."""
    setup = "DT-DT1-DT2-LS"
    rng = np.random.default_rng([11, min_run])
    removed = fewer = 0
    for case in range(120):
        step, (logits, hidden, draft), tensors, weight, bias = packed_case(rng, setup, "float32", 5)
        sequences = (step.input_ids, step.last_token_ids, step.request_types, step.host_context_lengths)
        head = ref.judge_head(setup, weight, bias, HT, HD, min_run)
        try:
            want = ref.packed_judge_logits(head, tensors[0], tensors[1], None, *sequences)
        except packed_step.StepMismatch:
            continue
        argmax, got = core.judge_rows(logits, hidden, *sequences, weight, bias, setup, None, min_run)
        assert_close_logits(got, want, f"case {case}")
        _, every = core.judge_rows(logits, hidden, *sequences, weight, bias, setup)
        removed += int((np.isfinite(every) & ~np.isfinite(got)).sum())
        threshold = ref.cut_in_a_gap(every, 1e-2)
        out = core.rewrite_logits(logits, argmax, every, *sequences, threshold, min_run)
        masked = np.where(np.isfinite(got), every, np.inf)  # the rule's rows, with the core's float32 logits
        np.testing.assert_array_equal(out, packed_step.rewrite_logits(logits, argmax, masked, *sequences, threshold),
                                      err_msg=f"case {case}")
        free = core.rewrite_logits(logits, argmax, every, *sequences, threshold)
        fewer += int((free != logits).any(axis=1).sum() - (out != logits).any(axis=1).sum())
    if min_run == 1:
        assert removed == 0 and fewer == 0
    else:
        assert removed > 10 and fewer > 0, (removed, fewer)

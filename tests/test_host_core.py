"""The C++ host core (libautojudge_host.so, the functions the CUDA kernels run) against the Python
reference: accept_tree + judge_relaxed token for token, the fused argmax + judge dot product
against NumPy, logits mode against accept mode, and torch.ops.autojudge on CPU.

The library is built by build_scripts/build_plugin.py into build/plugins (incrementally, once per
session)."""
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from trtllm_autojudge.decoding.rules import judge_relaxed, exact_runs
from trtllm_autojudge.decoding.tree import DraftTree
from trtllm_autojudge.spec import packed_step
from trtllm_autojudge.spec.acceptance import PAD, accept_tree
from trtllm_autojudge.spec.packed_step import StepMismatch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import packed_steps  # noqa: E402

pytestmark = pytest.mark.skipif(
    shutil.which("cmake") is None or (shutil.which("c++") is None and shutil.which("g++") is None),
    reason="needs cmake and a C++ compiler to build libautojudge_host.so")


@pytest.fixture(scope="module")
def core():
    from trtllm_autojudge.ops.host_library import host_core
    return host_core()


def to_bf16_bits(x: np.ndarray) -> np.ndarray:
    """bfloat16 bits (truncated float32), and their exact float32 values."""
    return (np.ascontiguousarray(x, np.float32).view(np.uint32) >> 16).astype(np.uint16)


def bf16_values(bits: np.ndarray) -> np.ndarray:
    return (bits.astype(np.uint32) << 16).view(np.float32)


def reference(draft_tokens, target_argmax, paths, judge_logit, threshold, draft_lens, min_run=1):
    relaxed = None if judge_logit is None else judge_relaxed(judge_logit.astype(np.float64), threshold.astype(np.float64))
    if relaxed is not None:  # JudgeRule.judgeable: a mismatch whose exact run is below min_run is never judged
        relaxed &= exact_runs(draft_tokens, target_argmax, paths, draft_lens) >= min_run
    return accept_tree(draft_tokens, target_argmax, paths, relaxed, draft_lens)


def assert_same(got, want, context=""):
    for name in ("accepted_len", "best_path", "judged_count", "accepted_tokens"):
        np.testing.assert_array_equal(getattr(got, name), getattr(want, name), err_msg=f"{name} {context}")


# ---------------------------------------------------------------------------------------------
# Random cases: chains and trees, ties between paths, -1 padding, NaN/inf, draft lengths 0 and N.

def random_paths(rng: np.random.Generator) -> np.ndarray:
    """[P, D+1] path rows of a chain, a static tree or a random tree, with padding and duplicates."""
    kind = rng.integers(3)
    if kind == 0:
        k = int(rng.integers(0, 33))
        paths = np.arange(k + 1, dtype=np.int32)[None]
    elif kind == 1:
        paths = DraftTree.static([int(w) for w in rng.integers(1, 4, size=rng.integers(1, 4))]).paths
    else:
        n = int(rng.integers(1, 64))
        parents = [-1] + [int(rng.integers(0, i)) for i in range(1, n + 1)]
        paths = DraftTree(tuple(parents), (0,) * (n + 1)).paths
    rows = [paths]
    if rng.random() < 0.3:
        rows.append(paths[rng.integers(len(paths), size=rng.integers(1, 3))])  # duplicate rows: index ties
    if rng.random() < 0.4:
        pad = np.full((int(rng.integers(1, 3)), paths.shape[1]), PAD, np.int32)
        rows.append(pad)
    out = np.concatenate(rows)
    return out[rng.permutation(len(out))]


def random_case(rng: np.random.Generator):
    paths1 = random_paths(rng)
    N = int(paths1.max(initial=0))
    B = int(rng.integers(1, 6))
    V = int(rng.integers(2, 6))  # a small vocabulary: many exact matches, long prefixes, ties
    paths = np.stack([paths1[rng.permutation(len(paths1))] for _ in range(B)])
    if rng.random() < 0.1:
        paths[:] = PAD  # no path row at all
    draft_tokens = rng.integers(0, V, size=(B, N)).astype(np.int32)
    target_argmax = rng.integers(0, V, size=(B, N + 1)).astype(np.int32)
    judge_logit = (rng.normal(size=(B, N + 1)) * 3).astype(np.float32)
    special = rng.random(size=judge_logit.shape)
    judge_logit[special < 0.05] = np.nan
    judge_logit[(special >= 0.05) & (special < 0.08)] = np.inf
    judge_logit[(special >= 0.08) & (special < 0.11)] = -np.inf
    judge_logit[(special >= 0.11) & (special < 0.14)] = 0.0
    threshold = rng.choice([0.0, 1.0, 0.5, rng.random(), rng.random()], size=B).astype(np.float32)
    draft_lens = rng.choice([0, N, int(rng.integers(0, N + 1))], size=B).astype(np.int32)
    return draft_tokens, target_argmax, paths, judge_logit, threshold, draft_lens


def test_host_core_equals_reference_on_random_cases(core):
    rng = np.random.default_rng(2024)
    held = 0  # judged acceptances a minimum run removed
    for case in range(3000):
        args = random_case(rng)
        lossless = case % 7 == 0
        if lossless:
            args = args[:3] + (None, None) + args[5:]
        min_run = (1, 3, 5)[case % 3]
        got = core.accept_tree(*args, min_run)
        assert_same(got, reference(*args, min_run), f"case {case} min_run {min_run}")
        if min_run > 1 and not lossless:
            held += int(core.accept_tree(*args).judged_count.sum() - got.judged_count.sum())
    assert held > 100, held


def test_judge_edge_cases(core):
    # node 1 mismatches (draft 7, target argmax at the root 3); node 2 would match
    draft_tokens, target_argmax = np.array([[7, 4]]), np.array([[3, 4, 9]])
    paths = np.array([[[0, 1, 2]]])
    cases = [  # (judge logit of node 1, threshold, accepted_len)
        (-1e30, 0.0, 0),  # threshold 0: logit(0) = -inf, nothing accepts
        (-np.inf, 0.0, 0), (-np.inf, 1.0, 0),  # an infinite logit never accepts
        (np.nan, 1.0, 0),  # NaN never accepts
        (1e30, 1.0, 2),  # threshold 1: every finite logit accepts
        (0.0, 0.5, 0), (-1e-30, 0.5, 2),  # logit(0.5) = 0: strictly below accepts
    ]
    for logit, threshold, length in cases:
        judge_logit = np.array([[-5.0, logit, 0.0]], np.float32)
        got = core.accept_tree(draft_tokens, target_argmax, paths, judge_logit, np.float32(threshold))
        want = reference(draft_tokens, target_argmax, paths, judge_logit, np.array([threshold], np.float32), None)
        assert_same(got, want, f"logit {logit} threshold {threshold}")
        assert got.accepted_len[0] == length, (logit, threshold)
    # the root is never judged: a judge logit at node 0 changes nothing
    for root_logit in (-100.0, 100.0, np.nan):
        got = core.accept_tree(draft_tokens, target_argmax, paths, np.array([[root_logit, 5.0, 5.0]], np.float32), 0.5)
        assert got.accepted_len[0] == 0 and got.accepted_tokens[0].tolist() == [3, PAD, PAD]


def test_draft_lengths_padding_and_bonus(core):
    draft_tokens, target_argmax = np.array([[1, 2, 3]] * 3), np.array([[1, 2, 3, 4]] * 3)  # all exact
    paths = np.array([[[0, 1, 2, 3]]] * 3)
    got = core.accept_tree(draft_tokens, target_argmax, paths, draft_lens=np.array([0, 2, 3]))
    assert got.accepted_len.tolist() == [0, 2, 3]
    assert got.accepted_tokens.tolist() == [[1, PAD, PAD, PAD], [1, 2, 3, PAD], [1, 2, 3, 4]]  # 4: the bonus token
    none = core.accept_tree(draft_tokens, target_argmax, np.full((3, 2, 4), PAD))  # only padding rows
    assert none.accepted_len.tolist() == [0] * 3 and none.best_path.tolist() == [0] * 3
    assert none.accepted_tokens[:, 0].tolist() == [1] * 3  # the target's token at the root


def test_path_ties(core):
    # draft: nodes 1..4 carry 5, 6, 5, 6; target argmax: root 5, node 1 0, node 2 0, node 3 6, node 4 0
    draft_tokens = np.array([[5, 6, 5, 6]])
    target_argmax = np.array([[5, 0, 0, 6, 0]])
    judge_logit = np.array([[0, -9, -9, -9, 9]], np.float32)  # the judge would pass nodes 1-3, not node 4
    threshold = np.array([0.5], np.float32)
    # [0, 1, 2]: 2 accepted, node 2 judged; [0, 3, 4]: 2 accepted, none judged -> fewer judged wins
    paths = np.array([[[0, 1, 2], [0, 1, 4], [0, 3, 4]]])
    got = core.accept_tree(draft_tokens, target_argmax, paths, judge_logit, threshold)
    assert_same(got, reference(draft_tokens, target_argmax, paths, judge_logit, threshold, None))
    assert (got.best_path[0], got.accepted_len[0], got.judged_count[0]) == (2, 2, 0)
    # the same best row at indices 1 and 3 -> the lower index
    paths = np.array([[[0, 1, 4], [0, 3, 4], [0, 1, 2], [0, 3, 4]]])
    got = core.accept_tree(draft_tokens, target_argmax, paths, judge_logit, threshold)
    assert_same(got, reference(draft_tokens, target_argmax, paths, judge_logit, threshold, None))
    assert (got.best_path[0], got.accepted_tokens[0].tolist()) == (1, [5, 6, 0])


def test_malformed_path_entries_end_the_path(core):
    """The reference refuses these; the core (which cannot raise inside a kernel) stops the path
    at the first index outside [1, draft_lens[b]] and never reads out of bounds."""
    draft_tokens, target_argmax = np.array([[1, 2, 3]]), np.array([[1, 2, 3, 4]])
    for row, length in (([0, 1, 7, 3], 1), ([0, 1, 0, 2], 1), ([0, -5, 1, 2], 0), ([0, 1, 2, 1 << 30], 2)):
        got = core.accept_tree(draft_tokens, target_argmax, np.array([[row]]))
        assert got.accepted_len[0] == length, row
    assert core.accept_tree(draft_tokens, target_argmax, np.array([[[0, 1, 2, 3]]]),
                            draft_lens=np.array([99])).accepted_len[0] == 3  # draft_lens clamped to N


def test_host_core_refuses_bad_shapes(core):
    with pytest.raises(ValueError, match=r"target_argmax must be \[B, N\+1\]"):
        core.accept_tree(np.zeros((2, 3), int), np.zeros((2, 3), int), np.zeros((2, 1, 4), int))
    with pytest.raises(ValueError, match="draft_tokens must hold integers"):
        core.accept_tree(np.zeros((2, 3)), np.zeros((2, 4), int), np.zeros((2, 1, 4), int))
    with pytest.raises(ValueError, match="needs a threshold"):
        core.accept_tree(np.zeros((1, 1), int), np.zeros((1, 2), int), np.zeros((1, 1, 2), int), np.zeros((1, 2)))
    one_node = (np.zeros((1, 1), int), np.zeros((1, 1, 2), int))  # draft_tokens [1, 1], paths [1, 1, 2]
    with pytest.raises(ValueError, match="judge_weight has 3 values"):
        core.judge_nodes(np.zeros((2, 4), np.float32), np.zeros((2, 2), np.float32), *one_node, np.zeros(3), 0.0, "DT")
    with pytest.raises(ValueError, match="float32, float16 or bfloat16"):
        core.judge_nodes(np.zeros((2, 4), np.float64), np.zeros((2, 2), np.float32), *one_node, np.zeros(2), 0.0, "DT")
    with pytest.raises(ValueError, match="reads draft hidden states: give draft_hidden"):
        core.judge_nodes(np.zeros((2, 4), np.float32), np.zeros((2, 2), np.float32), *one_node, np.zeros(4), 0.0,
                         "DD-DT")


# ---------------------------------------------------------------------------------------------
# The fused argmax + judge dot product (DT, DD-DT; the lookahead blocks: tests/test_host_core_lookahead.py).

@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
@pytest.mark.parametrize("vocab", [1, 7, 111, 8193, 32000])
def test_judge_nodes_argmax_and_dot_product(core, dtype, vocab):
    rng = np.random.default_rng(vocab)
    rows, ht, hd = 9, 48, 20
    logits = rng.normal(size=(rows, vocab)).astype(np.float32)
    logits[1, :] = 1.0  # a row of ties: the first index
    logits[2, rng.integers(vocab, size=3)] = np.nan  # NaN ranks above every number: the first NaN
    logits[3, :] = -np.inf
    logits[4, -1] = np.inf
    logits[5, :] = np.round(logits[5, :])  # many ties at the maximum
    hidden = rng.normal(size=(rows, ht)).astype(np.float32)
    draft = rng.normal(size=(rows, hd)).astype(np.float32)
    if dtype == "float16":
        logits, hidden, draft = logits.astype(np.float16), hidden.astype(np.float16), draft.astype(np.float16)
        values = lambda a: a.astype(np.float32)  # noqa: E731
    elif dtype == "bfloat16":
        logits, hidden, draft = to_bf16_bits(logits), to_bf16_bits(hidden), to_bf16_bits(draft)
        values = bf16_values
    else:
        values = lambda a: a  # noqa: E731
    want_argmax = np.argmax(values(logits), axis=1)
    draft_tokens = ((want_argmax[:-1] + 1) % vocab)[None]  # a chain of rows - 1 nodes, every one mismatching
    paths = np.arange(rows)[None, None]
    for draft_hidden in (None, draft):
        features = values(hidden) if draft_hidden is None else np.concatenate([values(draft), values(hidden)], 1)
        weight = rng.normal(size=features.shape[1]).astype(np.float32)
        setup = "DT" if draft_hidden is None else "DD-DT"
        argmax, judge_logit = core.judge_nodes(logits, hidden, draft_tokens, paths, weight, -0.25, setup, draft_hidden)
        np.testing.assert_array_equal(argmax[0], want_argmax)
        want = features.astype(np.float64) @ weight.astype(np.float64) - 0.25
        want[0] = np.inf  # the root is never scored, and with one token (vocab 1) every node is exact
        want[1:] = want[1:] if vocab > 1 else np.inf
        np.testing.assert_allclose(judge_logit[0], want, rtol=1e-5, atol=1e-4)


# ---------------------------------------------------------------------------------------------
# Logits mode: the packed-step segmentation and the rewrite, host core == Python reference
# (spec/packed_step.py), and exact-match acceptance of the rewritten logits == judge acceptance.

def as_dtype(logits: np.ndarray, dtype: str) -> np.ndarray:
    return {"float32": logits, "float16": logits.astype(np.float16), "bfloat16": to_bf16_bits(logits)}[dtype]


def values_of(logits: np.ndarray) -> np.ndarray:
    return bf16_values(logits) if logits.dtype == np.uint16 else logits.astype(np.float32)


def test_segmentation_equals_the_reference_on_random_packed_steps(core):
    rng = np.random.default_rng(15)
    mismatches = refused = well_formed = 0
    for case in range(4000):
        step = packed_steps.random_step(rng, vocab=50)
        if case % 2:
            step = packed_steps.corrupt(step, rng, vocab=50)
        args = (step.last_token_ids, len(step.input_ids), step.request_types, step.host_context_lengths)
        try:
            want = packed_step.segment_step(*args)
        except packed_step.StepMismatch:
            with pytest.raises(StepMismatch):
                core.segment_step(*args)
            mismatches += 1
            continue
        got = core.segment_step(*args)
        np.testing.assert_array_equal(got[0], want[0], err_msg=f"first rows, case {case} {step.corrupted}")
        np.testing.assert_array_equal(got[1], want[1], err_msg=f"draft counts, case {case} {step.corrupted}")
        refused += int((want[1] == packed_step.REFUSED).sum())
        if not step.corrupted:  # the rule finds the layout the step was built with
            np.testing.assert_array_equal(want[0], step.first_row)
            np.testing.assert_array_equal(want[1], step.num_drafts)
            well_formed += 1
    assert mismatches > 100 and refused > 300 and well_formed == 2000, (mismatches, refused, well_formed)


def test_segmentation_rule_on_hand_cases():
    seg = packed_step.segment_step
    # a context request of 5 tokens with 2 drafts (rows at 3, 4, 5), then two generation beams
    first, k = seg(np.array([3, 4, 5, 6, 7]), 7, np.array([0, 1, 1]), np.array([5, 9, 9]))
    assert first.tolist() == [0, 3, 4] and k.tolist() == [2, 0, 0]
    # the same rows with the root one token early: not the last 1 + K tokens -> refused
    assert seg(np.array([2, 4, 5]), 5, np.array([0]), np.array([5]))[1].tolist() == [packed_step.REFUSED]
    # more rows than tokens, and no row at all -> refused
    assert seg(np.array([1, 1, 2]), 2, np.array([0]), np.array([2]))[1].tolist() == [packed_step.REFUSED]
    assert seg(np.array([3]), 4, np.array([0, 1]), np.array([3, 4]))[1].tolist() == [0, packed_step.REFUSED]
    # a generation sequence holds one token whatever its context length says (LoRA plugin rule)
    with pytest.raises(packed_step.StepMismatch, match="hold 2 tokens"):
        seg(np.array([1, 2]), 3, np.array([1, 1]), np.array([3, 3]))


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_rewrite_equals_the_reference_and_exact_match_acceptance_equals_the_judge(core, dtype):
    rng = np.random.default_rng({"float32": 1, "float16": 2, "bfloat16": 3}[dtype])
    vocab, ht = 6, 16
    judged_rows = 0
    weight = rng.normal(size=ht).astype(np.float32)
    for case in range(1200):
        step = packed_steps.random_step(rng, vocab)
        L = len(step.last_token_ids)
        logits = as_dtype(rng.normal(size=(L, vocab)).astype(np.float32), dtype)
        packed_steps.steer_drafts(step, np.argmax(values_of(logits), axis=1), rng)
        if case % 3 == 2:
            step = packed_steps.corrupt(step, rng, vocab)
        threshold = float(rng.choice([0.0, 1.0, rng.random()]))
        sequences = (step.input_ids, step.last_token_ids, step.request_types, step.host_context_lengths)
        args = sequences + (threshold,)
        L = len(step.last_token_ids)
        if L != len(logits):  # a corruption added or removed a row
            logits = as_dtype(rng.normal(size=(L, vocab)).astype(np.float32), dtype)
        hidden = rng.normal(size=(L, ht)).astype(np.float32)  # the LM head's input rows: the DT feature
        try:
            packed_step.segment_step(step.last_token_ids, len(step.input_ids), step.request_types,
                                     step.host_context_lengths)
        except packed_step.StepMismatch:
            with pytest.raises(StepMismatch):
                core.judge_rows(logits, hidden, *sequences, weight, 0.1, "DT")
            with pytest.raises(StepMismatch):
                core.rewrite_logits(logits, np.zeros(L, np.int32), np.zeros(L, np.float32), *args)
            continue
        argmax, judge_logit = core.judge_rows(logits, hidden, *sequences, weight, 0.1, "DT")
        want = packed_step.rewrite_logits(logits, argmax, judge_logit, *args)
        got = core.rewrite_logits(logits, argmax, judge_logit, *args)
        assert got.dtype == logits.dtype
        np.testing.assert_array_equal(got, want, err_msg=f"case {case} {step.corrupted}")
        assert ((got != logits).sum(axis=1) <= 1).all(), "at most one entry per row changes"
        new_argmax = np.argmax(values_of(got), axis=1)
        first_row, num_drafts = packed_step.segment_step(step.last_token_ids, len(step.input_ids),
                                                         step.request_types, step.host_context_lengths)
        parents = {r for first, k in zip(first_row.tolist(), num_drafts.tolist()) for r in range(first, first + k)}
        changed_rows = set(np.flatnonzero((got != logits).any(axis=1)).tolist())
        assert changed_rows <= parents, f"case {case}: only parent rows of accepted sequences change, never refused ones"
        for first, k in zip(first_row.tolist(), num_drafts.tolist()):
            if k == packed_step.REFUSED:
                continue
            rows = list(range(first, first + k + 1))
            drafts = step.input_ids[step.last_token_ids[rows[1:]] - 1].reshape(1, k)
            paths = np.arange(k + 1, dtype=np.int32)[None, None]
            judge = accept_tree(drafts, argmax[rows][None], paths,
                                judge_relaxed(judge_logit[rows][None].astype(np.float64), threshold))
            stock = accept_tree(drafts, new_argmax[rows][None], paths)  # the stock decoder: exact match
            np.testing.assert_array_equal(stock.accepted_tokens, judge.accepted_tokens, err_msg=f"case {case}")
            judged_rows += int(judge.judged_count[0])
            for j in range(k):  # a rewritten row makes its draft token the unique maximum
                row, token = rows[j], int(drafts[0, j])
                if (got[row] != logits[row]).any():
                    others = np.delete(values_of(got)[row], token)
                    assert values_of(got)[row, token] > others.max()
    assert judged_rows > 100  # the judge let mismatches through, so rows were really rewritten


def test_refused_sequences_keep_their_rows(core):
    # request 0: context, 4 tokens, rows at 2, 3, 4 (root 2, drafts 3, 4) but row 1 moved to 1 -> refused
    input_ids = np.array([0, 1, 2, 2, 5], np.int32)
    last_token_ids = np.array([1, 3, 4, 5], np.int32)
    types, lengths = np.array([0, 1]), np.array([4, 7])
    logits = np.random.default_rng(0).normal(size=(4, 6)).astype(np.float32)
    argmax, judge_logit = np.argmax(logits, axis=1), np.full(4, -50.0, np.float32)  # the judge says yes everywhere
    out = core.rewrite_logits(logits, argmax, judge_logit, input_ids, last_token_ids, types, lengths, 1.0)
    np.testing.assert_array_equal(out, logits)
    assert core.segment_step(last_token_ids, 5, types, lengths)[1].tolist() == [packed_step.REFUSED, 0]
    # the aligned layout of the same step rewrites (the judge accepts every mismatch)
    aligned = np.array([2, 3, 4, 5], np.int32)
    assert core.segment_step(aligned, 5, types, lengths)[1].tolist() == [2, 0]
    assert (core.rewrite_logits(logits, argmax, judge_logit, input_ids, aligned, types, lengths, 1.0) != logits).any()


def test_logits_mode_leaves_rows_without_a_finite_value_above_their_maximum(core):
    input_ids = np.array([0, 1, 1, 1], np.int32)  # one context request: token 0 then drafts 1, 1, 1
    last_token_ids = np.array([1, 2, 3, 4], np.int32)
    logits = np.zeros((4, 3), np.float32)
    logits[0, 2] = np.finfo(np.float32).max  # no finite value above
    logits[1, 2] = np.nan
    logits[2, 0] = 5.0  # rewritable
    argmax = np.argmax(logits, axis=1)  # the NaN row's: its first NaN
    judge_logit = np.full(4, -10.0, np.float32)  # the judge accepts every draft
    out = core.rewrite_logits(logits, argmax, judge_logit, input_ids, last_token_ids, np.array([0]), np.array([4]), 0.5)
    np.testing.assert_array_equal(out[:2], logits[:2])
    assert out[2, 1] == np.nextafter(np.float32(5.0), np.float32(np.inf)) and np.argmax(out[2]) == 1
    np.testing.assert_array_equal(out[3], logits[3])  # the last row has no draft child
    want = packed_step.rewrite_logits(logits, argmax, judge_logit, input_ids, last_token_ids, [0], [4], 0.5)
    np.testing.assert_array_equal(out, want)


@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.uint16])
def test_next_above_reference_on_edge_values(dtype):
    unsigned = np.uint32 if dtype == np.float32 else np.uint16
    if dtype == np.uint16:  # bfloat16 bits
        bits = lambda v: int(to_bf16_bits(np.array([v], np.float32))[0])  # noqa: E731
        value = lambda b: float(bf16_values(np.array([b], np.uint16))[0])  # noqa: E731
        largest = float(bf16_values(np.array([0x7F7F], np.uint16))[0])
    else:
        bits = lambda v: int(np.array([v], dtype).view(unsigned)[0])  # noqa: E731
        value = lambda b: float(np.array([b], unsigned).view(dtype)[0])  # noqa: E731
        largest = float(np.finfo(dtype).max)
    for v in (0.0, -0.0, 1.0, -1.0, 3.5, -1e-3):
        above = packed_step.next_above(bits(v), dtype)
        assert value(above) > v and value(above) - v < 0.02 * max(abs(v), 1e-30) + 1e-30 + (abs(v) < 1e-20) * 1e-4
    for v in (np.inf, -np.inf, np.nan, largest):
        assert packed_step.next_above(bits(v), dtype) is None


# ---------------------------------------------------------------------------------------------
# torch.ops.autojudge on CPU tensors (the host core) and on CUDA tensors (the kernels).

def separated_case(rng: np.random.Generator, torch_dtype, ddt: bool):
    """Inputs whose judge logits lie at least 1e-2 away from each sequence's cut, so float32
    accumulation in any order gives the decisions of the float64 reference."""
    B, V, ht, hd = 4, 50, 32, 12
    tree = DraftTree.static([2, 2, 1])
    N, paths = tree.num_nodes, np.stack([tree.paths] * B)
    logits = torch.randn(B * (N + 1), V).to(torch_dtype)
    target_argmax = logits.float().argmax(-1).reshape(B, N + 1).numpy()
    draft_tokens = np.where(rng.random((B, N)) < 0.5, target_argmax[:, 1:], rng.integers(0, V, (B, N)))
    for b in range(B):  # make the draft follow the target along the first path often
        for n in range(1, N + 1):
            if rng.random() < 0.5:
                draft_tokens[b, n - 1] = target_argmax[b, tree.parents[n]]
    hidden = torch.randn(B * (N + 1), ht).to(torch_dtype)
    draft = torch.randn(B * (N + 1), hd).to(torch_dtype) if ddt else None
    feats = hidden.double() if draft is None else torch.cat([draft.double(), hidden.double()], -1)
    weight = torch.randn(feats.shape[1])
    judge_logit = (feats @ weight.double() + 0.3).reshape(B, N + 1).numpy()
    threshold = np.empty(B, np.float32)
    for b in range(B):
        cuts = np.sort(judge_logit[b])
        gaps = np.diff(cuts)
        i = int(np.argmax(gaps))
        threshold[b] = 1 / (1 + np.exp(-(cuts[i] + cuts[i + 1]) / 2))
        assert gaps[i] > 2e-2
    draft_lens = rng.integers(0, N + 1, size=B)
    want = accept_tree(draft_tokens, target_argmax, paths, judge_relaxed(judge_logit, threshold.astype(np.float64)),
                       draft_lens)
    inputs = (logits, hidden, torch.from_numpy(draft_tokens), torch.from_numpy(draft_lens), torch.from_numpy(paths),
              torch.from_numpy(threshold), weight, 0.3, draft)
    return inputs, want


@pytest.mark.parametrize("torch_dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("ddt", [False, True])
def test_torch_op_on_cpu_equals_reference(torch_dtype, ddt):
    from trtllm_autojudge.ops.torch_ops import accept
    rng = np.random.default_rng(7)
    torch.manual_seed(7)
    for _ in range(20):
        inputs, want = separated_case(rng, torch_dtype, ddt)
        got = accept(*inputs)
        np.testing.assert_array_equal(got.accepted_tokens.numpy(), want.accepted_tokens)
        np.testing.assert_array_equal(got.accepted_lens.numpy(), want.accepted_len)
        np.testing.assert_array_equal(got.best_path.numpy(), want.best_path)
        np.testing.assert_array_equal(got.judged_count.numpy(), want.judged_count)


def test_torch_ops_check_their_arguments():
    from trtllm_autojudge.ops.torch_ops import accept, rewrite_logits
    inputs, _ = separated_case(np.random.default_rng(0), torch.float32, False)
    logits, hidden, draft_tokens, draft_lens, paths, threshold, weight, bias, _ = inputs
    with pytest.raises(ValueError, match=r"target_logits must have B \* \(N \+ 1\)"):
        accept(logits[:-1], hidden[:-1], draft_tokens, draft_lens, paths, threshold, weight, bias)
    with pytest.raises(ValueError, match="judge_weight must be"):
        accept(logits, hidden, draft_tokens, draft_lens, paths, threshold, weight[:-1], bias)
    with pytest.raises(ValueError, match=r"paths must be \[B, P, D \+ 1\]"):
        accept(logits, hidden, draft_tokens, draft_lens, paths[:, 0], threshold, weight, bias)
    with pytest.raises(ValueError, match=r"last_token_ids must be \[L\]"):
        rewrite_logits(logits, hidden, torch.zeros(3), torch.zeros(2), torch.ones(1), torch.ones(1), 0.5, weight, bias)
    with pytest.raises(ValueError, match=r"host_context_lengths must be \[S\] \(CPU\)"):
        rewrite_logits(logits, hidden, torch.zeros(3), torch.zeros(len(logits)), torch.ones(2), torch.ones(1), 0.5,
                       weight, bias)


def test_torch_rewrite_logits_op_on_cpu_matches_the_host_core(core):
    from trtllm_autojudge.ops.torch_ops import rewrite_logits
    rng = np.random.default_rng(5)
    step = packed_steps.random_step(rng, 8)
    L = len(step.last_token_ids)
    logits = torch.randn(L, 8, dtype=torch.bfloat16)
    hidden = torch.randn(L, 4)
    weight = torch.randn(4)
    got = rewrite_logits(logits, hidden, torch.from_numpy(step.input_ids), torch.from_numpy(step.last_token_ids),
                         torch.from_numpy(step.request_types), torch.from_numpy(step.host_context_lengths), 0.7,
                         weight, 0.0)
    bits = logits.view(torch.int16).numpy().view(np.uint16)
    sequences = (step.input_ids, step.last_token_ids, step.request_types, step.host_context_lengths)
    argmax, judge_logit = core.judge_rows(bits, hidden.numpy(), *sequences, weight.numpy(), 0.0, "DT")
    want = core.rewrite_logits(bits, argmax, judge_logit, *sequences, 0.7)
    assert got.dtype == torch.bfloat16
    np.testing.assert_array_equal(got.view(torch.int16).numpy().view(np.uint16), want)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device (and a CUDA build of torch) to build "
                                                          "and run the CUDA extension; tests/gpu/run_all.sh covers it")
@pytest.mark.parametrize("torch_dtype", [torch.float32, torch.bfloat16])
def test_torch_op_on_cuda_equals_reference(torch_dtype):
    from trtllm_autojudge.ops.torch_ops import accept
    rng = np.random.default_rng(11)
    for _ in range(10):
        inputs, want = separated_case(rng, torch_dtype, True)
        got = accept(*[x.cuda() if isinstance(x, torch.Tensor) else x for x in inputs])
        np.testing.assert_array_equal(got.accepted_tokens.cpu().numpy(), want.accepted_tokens)
        np.testing.assert_array_equal(got.accepted_lens.cpu().numpy(), want.accepted_len)


@pytest.mark.parametrize("script", ["check_kernels.py", "bench_kernels.py"])
def test_gpu_scripts_run_their_cases_on_the_cpu(script):
    """tests/gpu's scripts in --smoke mode (host core instead of kernels): keeps them runnable."""
    path = Path(__file__).parent / "gpu" / script
    done = subprocess.run([sys.executable, str(path), "--smoke"], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "FAIL" not in done.stdout

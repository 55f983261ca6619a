"""Tree logits mode (TensorRT-LLM 1.2's EAGLE engine step): the C++ host core against the Python
reference (spec/tree_step.py) on random packed tree steps, broken ones included, its refusals before
any memory is written, and the property the mode exists for: after the rewrite, the stock exact-match
walk (acceptDraftTokensByIdsWithPaths) accepts exactly what the judge accepts on the original logits,
on every request, ties between paths included."""
import ctypes
import sys
from pathlib import Path

import numpy as np
import pytest

from trtllm_autojudge.decoding.rules import judge_relaxed
from trtllm_autojudge.spec import tree_step
from trtllm_autojudge.spec.acceptance import PAD, accept_tree
from trtllm_autojudge.spec.tree_step import TreeStepMismatch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import tree_steps  # noqa: E402
from test_host_core import as_dtype, core, pytestmark, values_of  # noqa: E402,F401 (the host core fixture and skip)


def reference_segmentation(step):
    first = tree_step.tree_step_rows(step.draft_lens, step.draft_tokens.shape[1], len(step.logits))
    refused = np.array([tree_step.request_refused(step.paths[b], int(step.draft_lens[b]), step.draft_tokens[b])
                        for b in range(len(step.draft_lens))])
    return first, refused


def random_steps(seed, count, vocab=5, broken_every=3):
    rng = np.random.default_rng(seed)
    for case in range(count):
        step = tree_steps.random_tree_step(rng, vocab)
        yield case, (tree_steps.break_step(step, rng) if case % broken_every == broken_every - 1 else step)


def test_segmentation_equals_the_reference(core):
    mismatches = refused = accepted = 0
    for case, step in random_steps(1, 3000):
        args = (len(step.logits), step.draft_tokens, step.draft_lens, step.paths)
        try:
            want = reference_segmentation(step)
        except TreeStepMismatch:
            with pytest.raises(TreeStepMismatch):
                core.segment_tree_step(*args)
            mismatches += 1
            continue
        got = core.segment_tree_step(*args)
        np.testing.assert_array_equal(got[0], want[0], err_msg=f"first rows, case {case} {step.broken}")
        np.testing.assert_array_equal(got[1], want[1], err_msg=f"refusals, case {case} {step.broken}")
        refused += int(want[1].sum())
        accepted += int((~want[1]).sum())
        if not step.broken:
            assert not want[1].any(), f"case {case}: a well-formed step is never refused"
    assert mismatches > 100 and refused > 200 and accepted > 3000, (mismatches, refused, accepted)


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_rewrite_equals_the_reference_and_stock_acceptance_equals_the_judge(core, dtype):
    """The rewrite bit for bit, only parent rows of judged best-path nodes change, and the stock walk on
    the rewritten logits == accept_tree + the judge on the original ones (tokens, lengths, best path)."""
    ht = 8
    weight = np.random.default_rng(0).normal(size=ht).astype(np.float32)
    judged = ties = 0
    for case, step in random_steps({"float32": 2, "float16": 3, "bfloat16": 4}[dtype], 1500):
        rng = np.random.default_rng(case)
        logits = as_dtype(step.logits, dtype)
        hidden = rng.normal(size=(len(logits), ht)).astype(np.float32)
        threshold = rng.choice([0.0, 1.0, 0.5, rng.random()], size=len(step.draft_lens)).astype(np.float32)
        tree = (step.draft_tokens, step.draft_lens, step.paths)
        try:
            first_rows, refused = reference_segmentation(step)
        except TreeStepMismatch:
            with pytest.raises(TreeStepMismatch):
                core.judge_tree_rows(logits, hidden, *tree, weight, 0.1, "DT")
            with pytest.raises(TreeStepMismatch):
                core.rewrite_tree_logits(logits, np.zeros(len(logits), np.int32), np.zeros(len(logits), np.float32),
                                         *tree, threshold)
            continue
        argmax, judge_logit = core.judge_tree_rows(logits, hidden, *tree, weight, 0.1, "DT")
        np.testing.assert_array_equal(argmax, np.argmax(values_of(logits), axis=1))
        want = tree_step.rewrite_tree_logits(logits, argmax, judge_logit, *tree, threshold)
        got = core.rewrite_tree_logits(logits, argmax, judge_logit, *tree, threshold)
        assert got.dtype == logits.dtype
        np.testing.assert_array_equal(got, want, err_msg=f"case {case} {step.broken}")
        assert ((got != logits).sum(axis=1) <= 1).all(), "at most one entry per row changes"
        ids = tree_step.target_ids(np.argmax(values_of(got), axis=1), step.draft_lens, step.draft_tokens.shape[1] + 1)
        for b, first in enumerate(first_rows.tolist()):
            n = int(step.draft_lens[b])
            rows = slice(first, first + n + 1)
            if refused[b]:
                assert (got[rows] == logits[rows]).all(), f"case {case}: a refused request's rows are copied"
                continue
            relaxed = judge_relaxed(judge_logit[rows][None].astype(np.float64), np.float64(threshold[b]))
            judge = accept_tree(step.draft_tokens[b, :n][None], argmax[rows][None], step.paths[b][None], relaxed)
            stock = tree_step.stock_accept(ids[b:b + 1], step.draft_tokens[b:b + 1], step.paths[b:b + 1])
            length = int(judge.accepted_len[0])
            assert stock.accepted_lens[0] == length + 1, f"case {case} request {b}"
            np.testing.assert_array_equal(stock.accepted_tokens[0, : length + 1], judge.accepted_tokens[0, : length + 1])
            assert stock.accepted_paths[0] == judge.best_path[0], f"case {case} request {b}: the same path row"
            judged += int(judge.judged_count[0])
            rows_of = [tuple(r) for r in step.paths[b].tolist() if r[0] == 0]
            ties += len(rows_of) > len(set(rows_of))
    assert judged > 300 and ties > 50, (judged, ties)


def test_the_judge_scores_the_nodes_accept_mode_scores(core):
    """judge_tree_rows on the ragged rows == judge_nodes (accept mode) on the same requests laid out
    one by one, for a lookahead judge too (greedy_child)."""
    from trtllm_autojudge.spec.judge_blocks import feature_size
    rng = np.random.default_rng(8)
    ht = 8
    for setup in ("DT", "DT-DT1-DT2-LS"):
        weight = rng.normal(size=feature_size(setup, ht, 0)).astype(np.float32)
        for case, step in random_steps(9, 200, broken_every=10 ** 9):
            hidden = rng.normal(size=(len(step.logits), ht)).astype(np.float32)
            N = step.draft_tokens.shape[1]
            greedy_child = rng.integers(-1, N + 1, size=(len(step.draft_lens), N + 1)) if setup != "DT" else None
            argmax, judge_logit = core.judge_tree_rows(step.logits, hidden, step.draft_tokens, step.draft_lens,
                                                       step.paths, weight, -0.3, setup, greedy_child)
            first_rows, _ = reference_segmentation(step)
            for b, first in enumerate(first_rows.tolist()):
                n = int(step.draft_lens[b])
                rows = slice(first, first + n + 1)
                one = core.judge_nodes(step.logits[rows], hidden[rows], step.draft_tokens[b:b + 1, :n],
                                       np.where(step.paths[b:b + 1] > n, PAD, step.paths[b:b + 1]), weight, -0.3, setup,
                                       None, None if greedy_child is None else greedy_child[b:b + 1, : n + 1])
                np.testing.assert_array_equal(argmax[rows], one[0][0])
                np.testing.assert_array_equal(judge_logit[rows], one[1][0], err_msg=f"{setup} case {case} request {b}")


def test_rows_without_a_finite_value_above_their_maximum_are_never_judged(core):
    # one request, chain root -> 1 -> 2; every draft mismatches and the judge says yes everywhere
    logits = np.zeros((3, 4), np.float32)
    logits[0, 3] = np.finfo(np.float32).max  # the root row cannot be rewritten: node 1 is not judged
    logits[1, 0] = 2.0
    draft_tokens, draft_lens, paths = np.array([[1, 2]]), np.array([2]), np.array([[[0, 1, 2], [PAD] * 3, [PAD] * 3]])
    argmax, judge_logit = np.argmax(logits, axis=1), np.full(3, -50.0, np.float32)
    out = core.rewrite_tree_logits(logits, argmax, judge_logit, draft_tokens, draft_lens, paths, 1.0)
    np.testing.assert_array_equal(out, logits)  # node 1 rejected, so node 2's parent row is not on the path either
    logits[0, 3] = 5.0
    out = core.rewrite_tree_logits(logits, np.argmax(logits, axis=1), judge_logit, draft_tokens, draft_lens, paths, 1.0)
    assert np.argmax(out[0]) == 1 and np.argmax(out[1]) == 2 and (out[2] == logits[2]).all()
    np.testing.assert_array_equal(out, tree_step.rewrite_tree_logits(logits, np.argmax(logits, axis=1), judge_logit,
                                                                     draft_tokens, draft_lens, paths, [1.0]))


def test_refusals_write_nothing(core):
    """A step the core refuses (status 2 for rows that do not add up, 1 for a bad argument) leaves the
    output buffer as it was: the checks run before any memory is written."""
    lib = core._lib
    logits = np.ones((3, 4), np.float32)
    out = np.full((3, 4), 7.0, np.float32)
    argmax, judge_logit = np.zeros(3, np.int32), np.full(3, -9.0, np.float32)
    draft_tokens, paths, threshold = np.ones((1, 2), np.int32), np.zeros((1, 3, 3), np.int32), np.ones(1, np.float32)
    p = lambda a: a.ctypes.data_as(ctypes.c_void_p)  # noqa: E731
    for draft_lens, status in ((np.array([5], np.int32), 2), (np.array([1], np.int32), 2)):  # out of range; 2 rows != 3
        got = lib.autojudge_host_rewrite_tree_logits(3, 4, 0, p(logits), p(argmax), p(judge_logit), 1, 2, p(draft_tokens),
                                                     p(draft_lens), 3, 3, p(paths), p(threshold), 1, p(out))
        assert got == status and (out == 7.0).all()
    got = lib.autojudge_host_rewrite_tree_logits(3, 4, 0, p(logits), p(argmax), p(judge_logit), 1, 2, p(draft_tokens),
                                                 p(np.array([2], np.int32)), 3, 3, None, p(threshold), 1, p(out))
    assert got == 1 and (out == 7.0).all()  # paths missing
    got = lib.autojudge_host_rewrite_tree_logits(3, 4, 0, p(logits), p(argmax), p(judge_logit), 1, 2, p(draft_tokens),
                                                 p(np.array([2], np.int32)), 3, 3, p(paths), p(threshold), 0, p(out))
    assert got == 1 and (out == 7.0).all()  # min_run below 1
    first, refused = np.full(1, 9, np.int32), np.full(1, 9, np.int32)
    assert lib.autojudge_host_segment_tree_step(4, 1, 2, p(draft_tokens), p(np.array([2], np.int32)), 3, 3, p(paths),
                                                p(first), p(refused)) == 2
    assert first[0] == 9 and refused[0] == 9


def test_the_stock_walk_reference_on_hand_cases():
    # request 0: root 0 -> 1 -> 2 and 0 -> 3; target ids: root 5, node 1 6, node 2 7, node 3 8
    target_ids = np.array([[5, 6, 7, 8]])
    paths = np.array([[[0, 1, 2], [0, 3, PAD], [PAD] * 3, [PAD] * 3]])
    full = tree_step.stock_accept(target_ids, np.array([[5, 6, 5]]), paths)  # 1 and 2 match: the whole row
    assert (full.accepted_lens[0], full.accepted_paths[0], full.accepted_tokens[0].tolist()) == (3, 0, [5, 6, 7])
    other = tree_step.stock_accept(target_ids, np.array([[9, 9, 5]]), paths)  # only row 1's node 3 matches
    assert (other.accepted_lens[0], other.accepted_paths[0]) == (2, 1)
    none = tree_step.stock_accept(target_ids, np.array([[9, 9, 9]]), paths)
    assert (none.accepted_lens[0], none.accepted_paths[0], none.accepted_tokens[0].tolist()) == (1, 0, [5, PAD, PAD])
    short = tree_step.stock_accept(target_ids, np.array([[9, 9, 5]]), np.array([[[0, 3, PAD], [0, 3, PAD]]]))
    assert (short.accepted_lens[0], short.accepted_paths[0]) == (2, 0)  # equal rows: the lower index
    with pytest.raises(TreeStepMismatch, match="own 3 logits rows"):
        tree_step.target_ids(np.zeros(4), np.array([2]), 4)


def test_host_core_checks_its_arguments(core):
    logits, hidden = np.zeros((3, 4), np.float32), np.zeros((3, 2), np.float32)
    tree = (np.zeros((1, 2), int), np.array([2]), np.zeros((1, 3, 3), int))
    with pytest.raises(ValueError, match="tree logits mode runs target-only judges"):
        core.judge_tree_rows(logits, hidden, *tree, np.zeros(4), 0.0, "DD-DT")
    with pytest.raises(ValueError, match=r"draft_lens must be \[B\]"):
        core.segment_tree_step(3, np.zeros((1, 2), int), np.array([2, 0]), np.zeros((1, 3, 3), int))
    with pytest.raises(ValueError, match="looks ahead: give greedy_child"):
        core.judge_tree_rows(logits, hidden, *tree, np.zeros(12), 0.0, "DT-DT1-DT2-LS")


@pytest.mark.parametrize("torch_dtype", ["float32", "bfloat16"])
def test_torch_op_on_cpu_equals_the_host_core(core, torch_dtype):
    import torch

    from trtllm_autojudge.ops.torch_ops import rewrite_tree_logits
    for case, step in random_steps(12, 40):
        rng = np.random.default_rng(case)
        logits = torch.from_numpy(step.logits).to(getattr(torch, torch_dtype))
        hidden = torch.from_numpy(rng.normal(size=(len(step.logits), 4)).astype(np.float32))
        weight, threshold = torch.randn(4), torch.from_numpy(rng.random(len(step.draft_lens)).astype(np.float32))
        tree = tuple(torch.from_numpy(a) for a in (step.draft_tokens, step.draft_lens, step.paths))
        bits = logits.view(torch.int16).numpy().view(np.uint16) if torch_dtype == "bfloat16" else logits.numpy()
        try:
            argmax, judge_logit = core.judge_tree_rows(bits, hidden.numpy(), *(t.numpy() for t in tree), weight.numpy(),
                                                       0.2, "DT")
        except TreeStepMismatch:
            with pytest.raises(TreeStepMismatch):
                rewrite_tree_logits(logits, hidden, *tree, threshold, weight, 0.2)
            continue
        want = core.rewrite_tree_logits(bits, argmax, judge_logit, *(t.numpy() for t in tree), threshold.numpy())
        got = rewrite_tree_logits(logits, hidden, *tree, threshold, weight, 0.2)
        assert got.dtype == logits.dtype
        got_bits = got.view(torch.int16).numpy().view(np.uint16) if torch_dtype == "bfloat16" else got.numpy()
        np.testing.assert_array_equal(got_bits, want)


@pytest.mark.parametrize("min_run", [1, 3, 5])
def test_min_run_scores_and_rewrites_as_the_rule(core, min_run):
    """The judge's minimum run in tree logits mode: judge_tree_rows scores the mismatches whose exact run
    (rules.exact_runs, JudgeRule.judgeable's rule on the request's tree) reaches min_run, and
    rewrite_tree_logits given every mismatch's logit applies the minimum itself: it equals the reference
    rewrite of the logits with the shorter runs removed. A minimum above 1 rewrites fewer rows."""
    from trtllm_autojudge.decoding.rules import exact_runs
    ht = 8
    weight = np.random.default_rng(5).normal(size=ht).astype(np.float32)
    removed = fewer = 0
    for case, step in random_steps(20 + min_run, 600, vocab=4, broken_every=10 ** 9):
        hidden = np.random.default_rng(case).normal(size=(len(step.logits), ht)).astype(np.float32)
        tree = (step.draft_tokens, step.draft_lens, step.paths)
        argmax, every = core.judge_tree_rows(step.logits, hidden, *tree, weight, 0.1, "DT")
        _, got = core.judge_tree_rows(step.logits, hidden, *tree, weight, 0.1, "DT", None, min_run)
        masked = every.copy()
        first_rows, _ = reference_segmentation(step)
        for b, first in enumerate(first_rows.tolist()):
            n = int(step.draft_lens[b])
            runs = exact_runs(step.draft_tokens[b:b + 1, :n], argmax[first:first + n + 1][None], step.paths[b:b + 1],
                                   [n])[0]  # [n+1]
            masked[first:first + n + 1][runs < min_run] = np.inf
        np.testing.assert_array_equal(got, masked, err_msg=f"scored nodes, case {case}")
        removed += int((np.isfinite(every) & ~np.isfinite(got)).sum())
        threshold = np.full(len(step.draft_lens), 1.0, np.float32)  # every scored node passes the judge
        out = core.rewrite_tree_logits(step.logits, argmax, every, *tree, threshold, min_run)
        np.testing.assert_array_equal(out, tree_step.rewrite_tree_logits(step.logits, argmax, masked, *tree, threshold),
                                      err_msg=f"case {case}")
        free = core.rewrite_tree_logits(step.logits, argmax, every, *tree, threshold)
        fewer += int((free != step.logits).any(axis=1).sum() - (out != step.logits).any(axis=1).sum())
    if min_run == 1:
        assert removed == 0 and fewer == 0
    else:
        assert removed > 20 and fewer > 0, (removed, fewer)

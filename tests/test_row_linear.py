"""The float32 CPU row-linear kernel: equal to torch's linear up to rounding on random inputs, one
row's output independent of the call's other rows (bitwise), and decoding unchanged with it."""
import argparse
import logging

import pytest
import torch
from torch import nn

import trtllm_autojudge.kernels.row_linear as row_linear
from tiny_models import tiny_pair
from trtllm_autojudge.decoding.speculative import greedy_generate, speculative_generate
from trtllm_autojudge.decoding.tree import DraftTree
from trtllm_autojudge.kernels.row_linear import (MAX_ROWS, RowLinear, RowLinearUnavailable, row_linear_extension,
                                                 use_row_linears)
from trtllm_autojudge.models.loading import load_pair
from trtllm_autojudge.models.vocab_subset import SubsetHead
from test_vocab_subset import prompts, subset_of


def kernel():
    try:
        return row_linear_extension()
    except RowLinearUnavailable as e:
        pytest.skip(f"the row-linear kernel cannot be built here: {e}")


@pytest.mark.parametrize("bias", [False, True])
def test_kernel_equals_torch_linear_on_random_inputs(bias):
    """Widths with and without a tail after the 8-lane blocks, outputs not a multiple of any block."""
    ext, g = kernel(), torch.Generator().manual_seed(0)
    for k in (1, 7, 8, 9, 16, 33, 576):
        for n in (1, 2, 5, 9, 64):
            w = torch.randn(n, k, generator=g)  # [N, K]
            b = torch.randn(n, generator=g) if bias else None  # [N]
            for m in (1, 2, 3, 4, 5, 9, 17):
                x = torch.randn(m, k, generator=g)  # [M, K]
                got, want = ext.row_linear(x, w, b), nn.functional.linear(x, w, b)  # [M, N]
                assert got.shape == want.shape
                torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5 * k ** 0.5), (k, n, m)


def test_a_rows_output_does_not_depend_on_the_other_rows():
    """Bitwise: the one-row step and every multi-row call (any block position) agree."""
    ext, g = kernel(), torch.Generator().manual_seed(1)
    for k, n in ((576, 1536), (1536, 576), (37, 11)):
        w, b = torch.randn(n, k, generator=g), torch.randn(n, generator=g)
        x = torch.randn(17, k, generator=g)  # [17, K]
        full = ext.row_linear(x, w, b)  # [17, N]
        for i in range(17):
            assert torch.equal(ext.row_linear(x[i:i + 1], w, b), full[i:i + 1]), (k, n, i)
        for m in (2, 3, 5, 8):
            assert torch.equal(ext.row_linear(x[:m], w, b), full[:m]), (k, n, m)


def test_row_linear_module_and_its_refusals():
    kernel()
    torch.manual_seed(2)
    lin = nn.Linear(24, 10).requires_grad_(False)
    rows = RowLinear(lin)
    assert rows.weight is lin.weight and rows.bias is lin.bias
    for shape in ((24,), (1, 24), (2, 3, 24), (MAX_ROWS + 1, 24)):
        x = torch.randn(*shape)
        with torch.no_grad():
            torch.testing.assert_close(rows(x), lin(x), rtol=1e-5, atol=1e-5)
    x = torch.randn(MAX_ROWS + 3, 24)  # above MAX_ROWS: torch's own linear, exactly
    with torch.no_grad():
        assert torch.equal(rows(x), lin(x))
    with pytest.raises(ValueError, match="float32 CPU weight"):
        RowLinear(nn.Linear(4, 4).to(torch.bfloat16))
    with torch.no_grad(), pytest.raises(RuntimeError, match="cast or move the model"):
        rows(torch.randn(2, 24, dtype=torch.bfloat16))
    with pytest.raises(RuntimeError, match="for inference"):
        rows(torch.randn(2, 24, requires_grad=True))
    with pytest.raises(ValueError, match="auto, rows, torch"):
        use_row_linears("fast", lin)


def test_a_pair_decodes_as_before_with_row_linears():
    """Greedy, chain and tree output of a tiny pair (a shared LM head and a subset head included) are the
    same tokens with the kernel; lossless still equals greedy."""
    kernel()
    target, draft = tiny_pair(seed=0)
    draft.model.lm_head = target.model.lm_head  # shared, as in the embedded pair
    draft.use_head(SubsetHead(draft.model.lm_head, subset_of(range(3, 96))))
    trees = (DraftTree.chain(3), DraftTree.static([2, 1]))

    def decode():
        return [(greedy_generate(target, p, 30), [speculative_generate(target, draft, p, tree=t, max_new_tokens=30).tokens
                                                  for t in trees]) for p in prompts(4)]

    before = decode()
    assert use_row_linears("torch", target.model, draft.model, draft.head) == 0
    n = use_row_linears("rows", target.model, draft.model, draft.head)
    assert n == 2 * 7 + 7 + 1 + 1  # 7 per layer (2 target, 1 draft), the shared LM head once, the subset rows
    assert isinstance(target.model.lm_head, RowLinear) and draft.model.lm_head is target.model.lm_head
    assert isinstance(draft.head.rows, RowLinear)
    after = decode()
    assert after == before
    assert all(tokens == greedy for greedy, chains in after for tokens in chains)
    assert use_row_linears("rows", target.model) == 0  # nothing left to replace


def test_unbuildable_kernel_falls_back_or_fails_as_asked(monkeypatch, caplog):
    def unavailable():
        raise RowLinearUnavailable("no compiler here")

    monkeypatch.setattr(row_linear, "row_linear_extension", unavailable)
    target, _ = tiny_pair(seed=0)
    with caplog.at_level(logging.WARNING):
        assert use_row_linears("auto", target.model) == 0
    assert "no compiler here" in caplog.text and type(target.model.lm_head) is nn.Linear
    with pytest.raises(RowLinearUnavailable, match="no compiler here"):
        use_row_linears("rows", target.model)
    args = argparse.Namespace(target="tuned", draft="embedded", draft_vocab="none", device="cpu", threads=None,
                              dtype="float32", cpu_linear="rows")
    with pytest.raises(SystemExit, match="--cpu-linear rows: no compiler here"):
        load_pair(args)

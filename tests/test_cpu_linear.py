"""Packed bf16 CPU linears: bit-identical to nn.Linear, shared heads stay shared, decoding unchanged."""
import pytest
import torch
from torch import nn

from tiny_models import tiny_pair
from trtllm_autojudge.decoding.speculative import greedy_generate, speculative_generate
from trtllm_autojudge.decoding.tree import DraftTree
from trtllm_autojudge.kernels.cpu_linear import PackedLinear, can_pack, pack_linears
from trtllm_autojudge.kernels.sibling_linear import SiblingGroup, SiblingLinear
from trtllm_autojudge.models.vocab_subset import SubsetHead
from test_vocab_subset import prompts, subset_of

pytestmark = pytest.mark.skipif(not can_pack(torch.bfloat16, "cpu"), reason="no oneDNN bf16 here: it needs an AVX-512 CPU and a torch build with oneDNN")


@pytest.mark.parametrize("bias", [False, True])
def test_packed_linear_equals_nn_linear_bitwise(bias):
    torch.manual_seed(0)
    for n_in, n_out in ((64, 96), (576, 1536), (1536, 576)):
        lin = nn.Linear(n_in, n_out, bias=bias).to(torch.bfloat16).requires_grad_(False)
        packed = PackedLinear(lin)
        for shape in ((1, n_in), (9, n_in), (2, 5, n_in), (n_in,)):
            x = torch.randn(*shape).to(torch.bfloat16)
            with torch.no_grad():
                assert torch.equal(packed(x), lin(x)), (n_in, n_out, shape)


def stacked_q(lin):
    k, v = (PackedLinear(nn.Linear(lin.in_features, 4).to(torch.bfloat16)) for _ in range(2))
    packed = PackedLinear(lin)
    return SiblingLinear(packed, SiblingGroup([packed, k, v]), 0)


@pytest.mark.parametrize("layout", [PackedLinear, stacked_q])
def test_packing_refuses_what_it_cannot_run(layout):
    lin32 = nn.Linear(8, 4)
    assert not can_pack(torch.float32, "cpu") and not can_pack(torch.bfloat16, "cuda")
    with pytest.raises(ValueError, match="bf16 CPU weight"):
        PackedLinear(lin32)
    packed = layout(nn.Linear(8, 4).to(torch.bfloat16))
    with torch.no_grad(), pytest.raises(RuntimeError, match="cast or move the model before packing"):
        packed(torch.randn(2, 8))
    with pytest.raises(RuntimeError, match="for inference"):
        packed(torch.randn(2, 8, dtype=torch.bfloat16, requires_grad=True))


def test_packed_pair_decodes_exactly_as_before():
    """Packing a bf16 pair (a shared LM head and a subset head included) changes no emitted token."""
    target, draft = tiny_pair(seed=0, dtype=torch.bfloat16)
    draft.model.lm_head = target.model.lm_head  # shared, as in the embedded pair
    draft.use_head(SubsetHead(draft.model.lm_head, subset_of(range(3, 96))))
    tree = DraftTree.chain(4)
    before = [(greedy_generate(target, p, 30), speculative_generate(target, draft, p, tree=tree, max_new_tokens=30).tokens)
              for p in prompts(4)]
    n = pack_linears(target.model, draft.model, draft.head)
    assert n == 2 * 7 + 7 + 1 + 1  # 7 per layer (2 target, 1 draft), the shared LM head once, the subset rows
    assert isinstance(target.model.lm_head, PackedLinear) and draft.model.lm_head is target.model.lm_head
    assert isinstance(draft.head.rows, PackedLinear)
    after = [(greedy_generate(target, p, 30), speculative_generate(target, draft, p, tree=tree, max_new_tokens=30).tokens)
             for p in prompts(4)]
    assert after == before
    assert pack_linears(target.model) == 0  # nothing left to pack

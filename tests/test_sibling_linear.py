"""Stacked sibling projections (q/k/v, gate/up): bit-identical to separate packed linears, in any
call order, and a stacked pair decodes exactly as before."""
import pytest
import torch
from torch import nn

from tiny_models import tiny_pair
from trtllm_autojudge.decoding.speculative import greedy_generate, speculative_generate
from trtllm_autojudge.decoding.tree import DraftTree
from trtllm_autojudge.kernels.cpu_linear import PackedLinear, can_pack, pack_linears
from trtllm_autojudge.kernels.sibling_linear import SiblingGroup, SiblingLinear, fuse_siblings
from test_vocab_subset import prompts

pytestmark = pytest.mark.skipif(not can_pack(torch.bfloat16, "cpu"), reason="no oneDNN bf16 here: it needs an AVX-512 CPU and a torch build with oneDNN")


def siblings(n_in, outs, bias):
    lins = [nn.Linear(n_in, n, bias=bias).to(torch.bfloat16).requires_grad_(False) for n in outs]
    group = SiblingGroup([PackedLinear(lin) for lin in lins])
    return lins, [SiblingLinear(PackedLinear(lin), group, i) for i, lin in enumerate(lins)]


@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize("mode", ["no_grad", "inference"])
def test_stacked_outputs_equal_separate_linears_in_any_order(bias, mode):
    torch.manual_seed(0)
    ctx = torch.no_grad if mode == "no_grad" else torch.inference_mode
    for n_in, outs in ((64, (64, 32, 32)), (576, (576, 192, 192)), (576, (1536, 1536))):
        lins, members = siblings(n_in, outs, bias)
        with ctx():
            for shape in ((1, n_in), (9, n_in), (2, 5, n_in), (n_in,)):
                x = torch.randn(*shape).to(torch.bfloat16)
                for order in (range(len(outs)), reversed(range(len(outs)))):
                    for i in order:
                        assert torch.equal(members[i](x), lins[i](x)), (n_in, outs, shape, i)
                # a member called twice on one input, or on another input in between, computes again
                y = torch.randn(*shape).to(torch.bfloat16)
                assert torch.equal(members[0](x), lins[0](x)) and torch.equal(members[0](x), lins[0](x))
                assert torch.equal(members[1](y), lins[1](y)) and torch.equal(members[1](x), lins[1](x))


def test_an_input_changed_in_place_is_computed_again():
    torch.manual_seed(0)
    lins, (q, k, v) = siblings(64, (64, 32, 32), bias=False)
    x = torch.randn(3, 64).to(torch.bfloat16)
    with torch.no_grad():
        q(x)
        x.mul_(2)  # version-tracked: k must not take the slice computed before the change
        assert torch.equal(k(x), lins[1](x)) and torch.equal(v(x), lins[2](x))


def test_stacked_pair_decodes_exactly_as_before():
    """Stacking a packed bf16 pair's projections changes no emitted token (chains and trees)."""
    target, draft = tiny_pair(seed=0, dtype=torch.bfloat16)
    pack_linears(target.model, draft.model)
    runs = lambda: [(greedy_generate(target, p, 30),  # noqa: E731
                     speculative_generate(target, draft, p, tree=DraftTree.chain(4), max_new_tokens=30).tokens,
                     speculative_generate(target, draft, p, tree=DraftTree.static([2, 2]), max_new_tokens=30).tokens)
                    for p in prompts(4)]
    before = runs()
    assert fuse_siblings(target.model, draft.model) == 2 * (2 + 1)  # attention + MLP, per layer (2 target, 1 draft)
    layer = target.model.model.layers[0]
    assert all(isinstance(getattr(layer.self_attn, n), SiblingLinear) for n in ("q_proj", "k_proj", "v_proj"))
    assert isinstance(layer.mlp.gate_proj, SiblingLinear) and isinstance(layer.mlp.down_proj, PackedLinear)
    assert runs() == before
    assert fuse_siblings(target.model) == 0  # nothing left to stack


def test_a_projection_shared_between_parents_is_left_alone():
    target, draft = tiny_pair(seed=0, dtype=torch.bfloat16)
    draft.model.model.layers[0].self_attn.k_proj = target.model.model.layers[0].self_attn.k_proj
    pack_linears(target.model, draft.model)
    assert fuse_siblings(target.model, draft.model) == 2 * (2 + 1) - 2  # layer 0's attention, in both models
    assert isinstance(target.model.model.layers[0].self_attn.q_proj, PackedLinear)
    assert isinstance(target.model.model.layers[1].self_attn.q_proj, SiblingLinear)

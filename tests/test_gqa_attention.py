"""Grouped-query attention reading the KV cache in place: bit-identical to transformers' SDPA path
(which copies the KV heads) on random inputs, and a switched pair decodes and batches exactly as before."""
import copy

import pytest
import torch
from torch import nn
from transformers.integrations.sdpa_attention import sdpa_attention_forward

from tiny_models import tiny_pair
from trtllm_autojudge.decoding.speculative import greedy_generate, speculative_generate
from trtllm_autojudge.decoding.tree import DraftTree
from trtllm_autojudge.kernels import gqa_attention
from trtllm_autojudge.kernels.gqa_attention import NAME, reads_kv_in_place, sdpa_gqa_forward, use_gqa_sdpa
from test_vocab_subset import prompts


class Heads(nn.Module):
    def __init__(self, groups: int):
        super().__init__()
        self.num_key_value_groups = groups
        self.is_causal = True


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_in_place_gqa_equals_transformers_sdpa_on_random_inputs(dtype):
    torch.manual_seed(0)
    for b, kv_heads, groups, q, k, d in ((1, 2, 2, 5, 9, 16), (4, 3, 3, 6, 70, 64), (3, 1, 4, 9, 40, 32), (2, 3, 3, 1, 33, 64)):
        module = Heads(groups)
        query = torch.randn(b, kv_heads * groups, q, d).to(dtype)  # [b, heads, q, d]
        key, value = torch.randn(2, b, kv_heads, k, d).to(dtype)  # [b, kv_heads, k, d] each
        mask = torch.rand(b, 1, q, k) > 0.4  # [b, 1, q, k], True = attend
        mask[..., 0] = True  # every query sees at least one key
        for m in (mask, None):
            ours, _ = sdpa_gqa_forward(module, query, key, value, m, scaling=d ** -0.5)
            theirs, _ = sdpa_attention_forward(module, query, key, value, m, scaling=d ** -0.5)
            assert ours.shape == (b, q, kv_heads * groups, d)
            assert torch.equal(ours, theirs), (b, kv_heads, groups, q, k, d, m is None)
        assert reads_kv_in_place(module, query, mask, {}) == (q > 1)  # a masked multi-token forward
        assert not reads_kv_in_place(module, query, None, {})


def test_only_sdpa_models_are_switched():
    target, draft = tiny_pair(seed=0)
    draft.model.set_attn_implementation("eager")
    assert use_gqa_sdpa(target.model, draft.model) == 1
    assert target.model.config._attn_implementation == NAME
    assert draft.model.config._attn_implementation == "eager"
    assert use_gqa_sdpa(target.model) == 0  # already switched


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_switched_pair_decodes_and_batches_exactly_as_before(dtype, monkeypatch):
    """Padded batch forwards (mining's batched regeneration) give the same logits; greedy, chain and
    tree decoding (tree verifies are masked) give the same tokens."""
    in_place = []  # forwards that took the in-place path
    check = gqa_attention.reads_kv_in_place
    monkeypatch.setattr(gqa_attention, "reads_kv_in_place", lambda *a: in_place.append(check(*a)) or in_place[-1])
    target, draft = tiny_pair(seed=0, dtype=dtype)
    runs = lambda t, d: [(greedy_generate(t, p, 30),  # noqa: E731
                          speculative_generate(t, d, p, tree=DraftTree.chain(4), max_new_tokens=30).tokens,
                          speculative_generate(t, d, p, tree=DraftTree.static([2, 2]), max_new_tokens=30).tokens)
                         for p in prompts(4)]
    before = runs(target, draft)
    switched_target, switched_draft = copy.deepcopy(target), copy.deepcopy(draft)
    assert use_gqa_sdpa(switched_target.model, switched_draft.model) == 2
    assert runs(switched_target, switched_draft) == before
    assert any(in_place), "the tree verifies never took the in-place path"
    in_place.clear()

    torch.manual_seed(1)
    ids = torch.randint(3, 96, (3, 12))  # [b, L] right-padded rows of 12, 7 and 4 tokens
    mask = (torch.arange(12)[None] < torch.tensor([12, 7, 4])[:, None]).long()  # [b, L]
    with torch.inference_mode():
        logits = [lm.model(input_ids=ids, attention_mask=mask).logits for lm in (target, switched_target)]  # [b, L, V]
    assert torch.equal(logits[0], logits[1]) and sum(in_place) == 2  # one per layer of the switched target

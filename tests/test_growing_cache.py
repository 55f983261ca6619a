"""The in-place growing KV cache holds exactly what transformers' concatenating one holds, copies
only when full, and a model decodes the same through it."""
import pytest
import torch
from transformers import DynamicCache
from transformers.cache_utils import DynamicLayer

from tiny_models import tiny_pair
from trtllm_autojudge.backends.growing_cache import GrowingLayer, growing_cache


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_growing_layer_holds_what_a_dynamic_layer_holds(dtype):
    g = torch.Generator().manual_seed(0)
    ours, ref = GrowingLayer(), DynamicLayer()
    moves = 0
    for step in range(60):
        new = int(torch.randint(1, 10, (1,), generator=g))
        k, v = torch.randn(2, 3, 2, new, 8, generator=g).to(dtype)  # [b, kv_heads, T, head_dim] each
        before = ours._buffers[0].data_ptr() if step and ours._buffers is not None else None
        out, expected = ours.update(k, v), ref.update(k, v)
        assert all(torch.equal(a, b) for a, b in zip(out, expected)), step
        assert torch.equal(ours.keys, ref.keys) and torch.equal(ours.values, ref.values)
        moves += before is not None and ours._buffers[0].data_ptr() != before
        if step % 17 == 16:  # cropped from outside: the next update starts from what is left
            ours.crop(-3)
            ref.crop(-3)
    assert 0 < moves < 10, moves  # copies only when the buffer is full


def test_growing_cache_replaces_only_full_attention_layers():
    target, _ = tiny_pair(seed=0)
    cache = growing_cache(target.model.config)
    assert len(cache.layers) == 2 and all(type(layer) is GrowingLayer for layer in cache.layers)


def test_a_model_decodes_the_same_through_a_growing_cache():
    """A right-padded batch prefilled, then decoded several tokens per step (as the batched
    regeneration does): every step's logits equal those through transformers' cache."""
    target, _ = tiny_pair(seed=0)
    model = target.model
    torch.manual_seed(1)
    lens = torch.tensor([9, 5, 7])  # valid tokens per row
    ids = torch.randint(3, 96, (3, 9))  # [b, L]
    mask = (torch.arange(9)[None] < lens[:, None]).long()  # [b, L]
    caches = [DynamicCache(config=model.config), growing_cache(model.config)]
    with torch.inference_mode():
        first = [model(input_ids=ids, attention_mask=mask, cache=c, use_cache=True).logits for c in caches]
        assert torch.equal(*first)
        for step in range(6):
            new = torch.randint(3, 96, (3, 3))  # [b, 3]
            mask = torch.cat([mask, torch.ones(3, 3, dtype=torch.long)], 1)
            positions = lens[:, None] + 3 * step + torch.arange(3)  # [b, 3]
            logits = [model(input_ids=new, attention_mask=mask, position_ids=positions, cache=c, use_cache=True).logits
                      for c in caches]  # [b, 3, V]
            assert torch.equal(*logits), step

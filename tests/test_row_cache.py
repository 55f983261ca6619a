"""Packed rows with per-row KV caches: a packed forward gives each row what the row's own batch-1
forward gives (float64), across steps that drop rejected entries; buffers grow without losing
entries; bad layouts and attentions are refused."""
import random

import pytest
import torch
from transformers import DynamicCache

from tiny_models import VOCAB, tiny_pair
from trtllm_autojudge.generation.regen_transformers import TransformersRegenerator
from trtllm_autojudge.kernels.gqa_attention import use_gqa_sdpa
from trtllm_autojudge.kernels.row_cache import PackedRows, RowKV


@torch.inference_mode()
def alone(model, tokens, start, cache):
    """Hidden states [t, H] of ``tokens`` at positions start.. on a batch-1 DynamicCache (the reference)."""
    ids = torch.tensor([tokens])
    positions = torch.arange(start, start + len(tokens))[None]
    return model.model(input_ids=ids, position_ids=positions, cache=cache, use_cache=True).last_hidden_state[0]


@torch.inference_mode()
def packed(model, rows, fed):
    """Hidden states [T, H] of every row's ``fed`` tokens in one packed forward."""
    layout = PackedRows(rows, [len(f) for f in fed])
    ids = torch.tensor([[t for f in fed for t in f]])
    positions = torch.tensor([[row.length + k for row, f in zip(rows, fed) for k in range(len(f))]])
    return model.model(input_ids=ids, attention_mask=layout.placeholder_mask, position_ids=positions, cache=layout,
                       packed_rows=layout, use_cache=True).last_hidden_state[0]


@pytest.mark.parametrize("seed", range(4))
def test_packed_rows_equal_each_row_alone_float64(seed):
    rng = random.Random(seed)
    target, _ = tiny_pair(seed=seed, dtype=torch.float64)
    model = target.model
    use_gqa_sdpa(model)
    n_rows = rng.randint(1, 5)
    refs, rows = [], []
    for _ in range(n_rows):  # each row's prefix prefilled alone; the row starts from a copy of its entries
        cache = DynamicCache(config=model.config)
        prefix = [rng.randrange(VOCAB) for _ in range(rng.randint(1, 30))]
        alone(model, prefix, 0, cache)
        refs.append(cache)
        rows.append(RowKV([layer.keys[0] for layer in cache.layers], [layer.values[0] for layer in cache.layers]))
    for step in range(6):
        fed = [[rng.randrange(VOCAB) for _ in range(rng.randint(1, 6))] for _ in rows]
        got = packed(model, rows, fed)  # [T, H]
        s = 0
        for row, ref, f in zip(rows, refs, fed):
            start = row.length
            expected = alone(model, f, start, ref)
            assert torch.allclose(got[s:s + len(f)], expected, rtol=0, atol=1e-10), (step, start, len(f))
            s += len(f)
            kept = rng.randint(1, len(f))  # a window rejected after its first `kept` tokens
            row.keep(start + kept)
            if kept < len(f):
                ref.crop(kept - len(f))  # transformers' crop takes the number of entries to remove, negated
    assert any(row.keys[0].shape[1] > row.length + 1 for row in rows)  # rejected entries were overwritten in place


def test_row_kv_grows_and_keeps_its_entries():
    g = torch.Generator().manual_seed(0)
    keys, values = torch.randn(2, 3, 5, 8, generator=g)  # [kv_heads, N, head_dim] each
    row = RowKV([keys], [values])
    expected_k, expected_v = [keys], [values]
    for _ in range(40):
        k, v = torch.randn(2, 3, 7, 8, generator=g)
        row.write(0, k, v)
        row.keep(row.length + 4)  # 3 of the 7 dropped
        expected_k.append(k[:, :4])
        expected_v.append(v[:, :4])
    ks, vs = row.prefix(row.length)
    assert torch.equal(ks[0], torch.cat(expected_k, 1)) and torch.equal(vs[0], torch.cat(expected_v, 1))
    assert row.keys[0].shape[1] < 2 * row.length + RowKV.slack  # grown by half, not per write


def test_packed_rows_refuse_a_row_that_feeds_nothing():
    row = RowKV([torch.zeros(2, 3, 8)], [torch.zeros(2, 3, 8)])
    with pytest.raises(ValueError, match="at least one token"):
        PackedRows([row, row], [2, 0])


def test_batched_regeneration_refuses_eager_attention():
    target, _ = tiny_pair(seed=0)
    target.model.set_attn_implementation("eager")
    with pytest.raises(ValueError, match="attn_implementation='sdpa'"):
        TransformersRegenerator(target)

"""The EAGLE head: its decoder layer is Hugging Face Llama's, its files carry the names TensorRT-LLM's
EAGLE converter reads, and loading refuses a head made for another target, saying what differs."""
import json

import numpy as np
import pytest
import torch
from safetensors.torch import load_file, save_file
from transformers.models.llama.modeling_llama import LlamaDecoderLayer, LlamaRotaryEmbedding

from tiny_models import tiny_pair
from trtllm_autojudge.models.eagle_head import (CONFIG_FILE, WEIGHTS_FILE, EagleHeadConfig, EagleLayer,
                                                load_eagle_head, random_eagle_head)


@pytest.fixture(scope="module")
def target():
    return tiny_pair(seed=0)[0]


def test_layer_equals_hugging_face_llama_decoder_layer(target):
    cfg = target.model.config
    torch.manual_seed(0)
    hf = LlamaDecoderLayer(cfg, layer_idx=1)
    for p in hf.parameters():
        p.data.normal_(0, 0.1)
    mine = EagleLayer(EagleHeadConfig.like_target(cfg), first=False)
    mine.load_state_dict(hf.state_dict())  # the same parameter names
    T = 9
    x = torch.randn(1, T, cfg.hidden_size)
    positions = torch.arange(3, 3 + T)
    mask = torch.full((T, T), float("-inf")).triu(1)[None, None]
    want = hf(x, attention_mask=mask, position_ids=positions[None],
              position_embeddings=LlamaRotaryEmbedding(cfg)(x, positions[None]))
    want = want[0] if isinstance(want, tuple) else want
    cos, sin = random_eagle_head(target.model).rope(positions)
    got = mine(x[0], cos, sin, None, torch.ones(T, T, dtype=torch.bool).tril())
    torch.testing.assert_close(got, want[0], atol=1e-5, rtol=1e-5)


def converter_names(layers: int) -> set[str]:
    """The tensors examples/eagle/convert_checkpoint.py (TensorRT-LLM 1.2) loads from the head directory:
    ModelWeightsLoader maps eagle_nets.{i}.drafter.{vocab_embedding, fc, layers.l.attention.qkv/dense,
    mlp.fc/gate/proj, input_layernorm, post_layernorm} to these (lm_head comes from the target)."""
    names = {"embed_tokens.weight", "fc.weight", "fc.bias"}
    for i in range(layers):
        names |= {f"layers.{i}.self_attn.{p}_proj.weight" for p in "qkvo"}
        names |= {f"layers.{i}.mlp.{p}_proj.weight" for p in ("gate", "up", "down")}
        names |= {f"layers.{i}.post_attention_layernorm.weight"} | ({f"layers.{i}.input_layernorm.weight"} if i else set())
    return names


def test_save_writes_the_converters_layout_and_load_round_trips(target, tmp_path):
    head = random_eagle_head(target.model, num_layers=2, seed=4, meta={"tokenizer": "abc", "target_model": "tiny"})
    head.save(tmp_path / "head")
    assert set(load_file(str(tmp_path / "head" / WEIGHTS_FILE))) == converter_names(2)
    config = json.loads((tmp_path / "head" / CONFIG_FILE).read_text())
    assert config["num_hidden_layers"] == 2 and config["hidden_size"] == target.hidden_size
    assert config["architectures"] == ["LlamaForCausalLM"] and config["vocab_size"] == target.vocab_size
    for path in (tmp_path / "head", tmp_path / "head" / WEIGHTS_FILE):
        back = load_eagle_head(path, hidden_size=target.hidden_size, vocab_size=target.vocab_size, tokenizer="abc")
        assert back.meta == {"tokenizer": "abc", "target_model": "tiny"}
        tokens, hidden = torch.tensor([5, 6, 7]), torch.randn(3, target.hidden_size)
        with torch.no_grad():
            torch.testing.assert_close(back(tokens, hidden, torch.arange(3)), head(tokens, hidden, torch.arange(3)),
                                       atol=0, rtol=0)


def test_load_refuses_a_head_for_another_target_naming_every_difference(target, tmp_path):
    random_eagle_head(target.model, meta={"tokenizer": "abc"}).save(tmp_path / "head")
    with pytest.raises(ValueError) as err:
        load_eagle_head(tmp_path / "head", hidden_size=32, vocab_size=100, tokenizer="xyz")
    message = str(err.value)
    assert "hidden size: head 64, target 32" in message and "vocabulary: head 96 tokens, target 100" in message
    assert "tokenizer fingerprint: head abc, target's tokenizer xyz" in message
    load_eagle_head(tmp_path / "head", hidden_size=64, vocab_size=96)  # no tokenizer given: not checked


def test_load_refuses_files_that_are_not_heads(target, tmp_path):
    with pytest.raises(FileNotFoundError, match="no EAGLE head"):
        load_eagle_head(tmp_path, hidden_size=64, vocab_size=96)
    save_file({"x": torch.zeros(2)}, str(tmp_path / "other.safetensors"))
    with pytest.raises(ValueError, match="not an EAGLE head"):
        load_eagle_head(tmp_path / "other.safetensors", hidden_size=64, vocab_size=96)
    random_eagle_head(target.model, num_layers=2).save(tmp_path / "head")
    weights = tmp_path / "head" / WEIGHTS_FILE
    state = load_file(str(weights))
    del state["layers.1.input_layernorm.weight"]
    from safetensors import safe_open
    with safe_open(str(weights), "pt") as f:
        metadata = f.metadata()
    save_file(state, str(weights), metadata=metadata)
    with pytest.raises(ValueError, match=r"tensors missing \['layers.1.input_layernorm.weight'\]"):
        load_eagle_head(weights, hidden_size=64, vocab_size=96)


def test_config_refusals():
    with pytest.raises(ValueError, match="multiple of num_kv_heads"):
        EagleHeadConfig(64, 128, 1, 4, 3, 96)
    cfg = tiny_pair(seed=0)[0].model.config
    cfg.rope_parameters = {"rope_type": "llama3", "rope_theta": 1.0}
    with pytest.raises(ValueError, match="plain RoPE only"):
        EagleHeadConfig.like_target(cfg)


def test_random_head_shares_the_targets_embedding(target):
    head = random_eagle_head(target.model)
    np.testing.assert_array_equal(head.embed_tokens.weight.detach().numpy(),
                                  target.model.get_input_embeddings().weight.detach().numpy())

"""Tiny random-weight Llama pair for CPU tests: the draft is the target's first layer."""
from __future__ import annotations

import copy

import torch
from transformers import LlamaConfig, LlamaForCausalLM

from trtllm_autojudge.models.transformers_backend import TransformersLM

VOCAB = 96
EOS = 2


def tiny_pair(seed: int = 0, layers: int = 2, vocab: int = VOCAB, dtype=torch.float32) -> tuple[TransformersLM, TransformersLM]:
    torch.manual_seed(seed)
    cfg = LlamaConfig(vocab_size=vocab, hidden_size=64, intermediate_size=128, num_hidden_layers=layers,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=512,
                      eos_token_id=EOS, bos_token_id=1, tie_word_embeddings=False)
    target = LlamaForCausalLM(cfg).eval().to(dtype)
    draft = copy.deepcopy(target)
    draft.model.layers = draft.model.layers[:1]
    draft.config.num_hidden_layers = 1
    return TransformersLM(target, [EOS], "tiny-target"), TransformersLM(draft, [EOS], "tiny-draft")

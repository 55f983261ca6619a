"""A tiny pair saved as HF checkpoint folders, for the real server: a character tokenizer with a chat
template (so the task's prompt format applies), a 2-layer random Llama target, its first layer as
the draft, and a random lookahead judge (the context route's setup). conftest.py makes it a fixture."""
from __future__ import annotations

import copy
import string
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers
from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

from trtllm_autojudge.judge.head import JudgeHead, feature_dim
from trtllm_autojudge.trt.triton.cpu import ReferencePair

CONTEXT = 512  # the target's max_position_embeddings: the context a request must fit
CHAT_TEMPLATE = ("{% for m in messages %}<{{ m['role'] }}>{{ m['content'] }}\n{% endfor %}"
                 "{% if add_generation_prompt %}<assistant>{% endif %}")
HIDDEN = 64


@dataclass(frozen=True)
class TinyPair:
    target: Path
    draft: Path
    judge: Path  # DT-DT1-DT2-LS, default threshold 0.5

    def pair(self, **changes) -> ReferencePair:
        fields = dict(target=str(self.target), draft=str(self.draft), draft_vocab="none", task="gsm8k-program",
                      dtype="float32", cpu_linear="torch", threads=1)
        return ReferencePair(**{**fields, **changes})


def char_tokenizer() -> PreTrainedTokenizerFast:
    vocab = {"<unk>": 0, "<s>": 1, "</s>": 2, **{c: i + 3 for i, c in enumerate(sorted(set(string.printable)))}}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Split(Regex(r"[\s\S]"), behavior="isolated")
    tok.decoder = decoders.Fuse()
    return PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="<unk>", bos_token="<s>", eos_token="</s>",
                                   chat_template=CHAT_TEMPLATE)


def tiny_target(tokenizer, seed: int = 0) -> LlamaForCausalLM:
    torch.manual_seed(seed)
    cfg = LlamaConfig(vocab_size=len(tokenizer), hidden_size=HIDDEN, intermediate_size=128, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=CONTEXT,
                      eos_token_id=tokenizer.eos_token_id, bos_token_id=tokenizer.bos_token_id, tie_word_embeddings=False)
    return LlamaForCausalLM(cfg).eval()


def save_tiny_pair(root: Path) -> TinyPair:
    tokenizer = char_tokenizer()
    target = tiny_target(tokenizer)
    draft = copy.deepcopy(target)  # the target's embeddings, first layer and head
    draft.model.layers = draft.model.layers[:1]
    draft.config.num_hidden_layers = 1
    for model, name in ((target, "target"), (draft, "draft")):
        model.save_pretrained(root / name)
        tokenizer.save_pretrained(root / name)
    rng = np.random.default_rng(0)
    F = feature_dim("DT-DT1-DT2-LS", HIDDEN, HIDDEN)
    JudgeHead(rng.normal(size=F), np.zeros(F), np.ones(F), 0.0, "DT-DT1-DT2-LS", HIDDEN, HIDDEN,
              threshold=0.5).save(root / "judge.safetensors")
    return TinyPair(root / "target", root / "draft", root / "judge.safetensors")

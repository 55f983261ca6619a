"""An EAGLE-1/2 draft head: one small Llama decoder stack over [embedding(token), target hidden state],
read out through the target's frozen LM head, in the layout TensorRT-LLM 1.2's EAGLE converter reads.

The EagleNet of TensorRT-LLM 1.2 (``tensorrt_llm/models/eagle/model.py``: ``EagleNet`` is a
``LLaMAModel`` with ``fc_after_embed``, ``use_input_layernorm_in_first_layer = False``,
``use_last_layernorm = False``; ``LLaMAModel.forward`` computes ``fc(concat([embedding, hidden]))``)
is, for a pair (target hidden state h_i at position i, token x_{i+1})::

    x = fc([embed_tokens(x_{i+1}) | h_i])           fc: Linear(2H -> H, bias)
    x = layers(x)                                    Llama decoder layers; layer 0 without input_layernorm
    feature f_i = x                                  no final norm; f_i predicts the target's h_{i+1}
    logits = lm_head(f_i)                            the target's LM head: the token after x_{i+1}

A tree node's children are drafted from the feature of its pair (the feature of its parent, its
token): the head then reads its own feature where the target's hidden state is not known yet.

Checkpoint layout: the EAGLE converter (``examples/eagle/convert_checkpoint.py``,
``EagleForCausalLM.from_hugging_face``) reads the head as a Hugging Face Llama directory
(``LlamaConfig.from_pretrained``; ``ModelWeightsLoader`` maps ``eagle_nets.{i}.drafter`` to the top
level, ``fc`` to ``fc``) and copies ``lm_head.weight`` from the target. So :meth:`EagleHead.save`
writes ``config.json`` and ``model.safetensors`` with the tensors ``embed_tokens.weight [V, H]``,
``fc.weight [H, 2H]``, ``fc.bias [H]`` and per layer ``layers.{l}.self_attn.{q,k,v,o}_proj.weight``,
``layers.{l}.mlp.{gate,up,down}_proj.weight``, ``layers.{l}.post_attention_layernorm.weight``
(``layers.{l}.input_layernorm.weight`` for l >= 1). The safetensors metadata ``autojudge_eagle_head``
records the shapes and the target it was made for; :func:`load_eagle_head` refuses a head whose
hidden size, vocabulary or tokenizer differs from the target's, saying which.
"""
from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Sequence

import torch
import torch.nn.functional as F
from safetensors import safe_open
from safetensors.torch import load_file, save_file
from torch import nn

META_KEY = "autojudge_eagle_head"
FORMAT_VERSION = 1
WEIGHTS_FILE = "model.safetensors"
CONFIG_FILE = "config.json"
EMBEDDING = "embed_tokens.weight"  # the target's embedding, which the head shares


@dataclass(frozen=True)
class EagleHeadConfig:
    """Shapes of a head; ``hidden_size`` and ``vocab_size`` are the target's (the head shares its LM head)."""

    hidden_size: int  # H
    intermediate_size: int
    num_layers: int
    num_heads: int
    num_kv_heads: int
    vocab_size: int  # V
    rms_norm_eps: float = 1e-6
    rope_theta: float = 10000.0
    max_position_embeddings: int = 4096

    def __post_init__(self):
        if self.num_layers < 1 or self.num_heads < 1 or self.num_kv_heads < 1 or self.num_heads % self.num_kv_heads:
            raise ValueError(f"an EAGLE head needs >= 1 layer and num_heads a multiple of num_kv_heads, got {self}")
        if self.hidden_size % self.num_heads:
            raise ValueError(f"hidden_size {self.hidden_size} is not a multiple of num_heads {self.num_heads}")

    @property
    def head_dim(self) -> int:
        return self.hidden_size // self.num_heads

    @classmethod
    def like_target(cls, target_config, num_layers: int = 1) -> "EagleHeadConfig":
        """A head of ``num_layers`` layers shaped like one layer of a Llama target (EAGLE-1's choice)."""
        c = target_config
        rope = dict(getattr(c, "rope_parameters", None) or getattr(c, "rope_scaling", None) or {})  # transformers 5 / 4
        if rope.get("rope_type", rope.get("type", "default")) != "default":
            raise ValueError(f"the target uses RoPE scaling {rope}; this head implements plain RoPE only")
        theta = float(rope.get("rope_theta", getattr(c, "rope_theta", 10000.0)))
        return cls(int(c.hidden_size), int(c.intermediate_size), num_layers, int(c.num_attention_heads),
                   int(getattr(c, "num_key_value_heads", None) or c.num_attention_heads), int(c.vocab_size),
                   float(c.rms_norm_eps), theta, int(c.max_position_embeddings))

    def llama_config(self, dtype: torch.dtype) -> dict:
        """The Hugging Face ``LlamaConfig`` fields the EAGLE converter reads from the head directory."""
        return {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": self.hidden_size,
                "intermediate_size": self.intermediate_size, "num_hidden_layers": self.num_layers,
                "num_attention_heads": self.num_heads, "num_key_value_heads": self.num_kv_heads,
                "head_dim": self.head_dim, "vocab_size": self.vocab_size, "rms_norm_eps": self.rms_norm_eps,
                "rope_theta": self.rope_theta, "max_position_embeddings": self.max_position_embeddings,
                "hidden_act": "silu", "tie_word_embeddings": False, "torch_dtype": str(dtype).removeprefix("torch.")}


class RMSNorm(nn.Module):
    def __init__(self, size: int, eps: float):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(size))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # [T, H] -> [T, H], Llama's: float32 statistics
        x32 = x.float()
        return self.weight * (x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + self.eps)).to(x.dtype)


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    return torch.cat([-x[..., half:], x[..., :half]], dim=-1)


class LayerCache:
    """Keys and values of one layer for one sequence: ``[Hkv, L, d]`` each."""

    def __init__(self):
        self.keys: torch.Tensor | None = None
        self.values: torch.Tensor | None = None


class EagleLayer(nn.Module):
    """A Llama decoder layer (Hugging Face parameter names); ``first`` has no input_layernorm."""

    def __init__(self, config: EagleHeadConfig, first: bool):
        super().__init__()
        H, d = config.hidden_size, config.head_dim
        self.config = config
        self.input_layernorm = nn.Identity() if first else RMSNorm(H, config.rms_norm_eps)
        self.self_attn = nn.Module()
        self.self_attn.q_proj = nn.Linear(H, config.num_heads * d, bias=False)
        self.self_attn.k_proj = nn.Linear(H, config.num_kv_heads * d, bias=False)
        self.self_attn.v_proj = nn.Linear(H, config.num_kv_heads * d, bias=False)
        self.self_attn.o_proj = nn.Linear(config.num_heads * d, H, bias=False)
        self.post_attention_layernorm = RMSNorm(H, config.rms_norm_eps)
        self.mlp = nn.Module()
        self.mlp.gate_proj = nn.Linear(H, config.intermediate_size, bias=False)
        self.mlp.up_proj = nn.Linear(H, config.intermediate_size, bias=False)
        self.mlp.down_proj = nn.Linear(config.intermediate_size, H, bias=False)

    def attention(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, cache: LayerCache | None,
                  mask: torch.Tensor) -> torch.Tensor:
        """x [T, H], cos/sin [T, d], mask [T, L + T] bool (True = attend) -> [T, H]."""
        c, T = self.config, x.shape[0]
        q = self.self_attn.q_proj(x).view(T, c.num_heads, c.head_dim).transpose(0, 1)  # [Hq, T, d]
        k = self.self_attn.k_proj(x).view(T, c.num_kv_heads, c.head_dim).transpose(0, 1)  # [Hkv, T, d]
        v = self.self_attn.v_proj(x).view(T, c.num_kv_heads, c.head_dim).transpose(0, 1)  # [Hkv, T, d]
        q, k = q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin
        if cache is not None:
            if cache.keys is not None:
                k, v = torch.cat([cache.keys, k], dim=1), torch.cat([cache.values, v], dim=1)  # [Hkv, L+T, d]
            cache.keys, cache.values = k, v
        groups = c.num_heads // c.num_kv_heads
        k, v = k.repeat_interleave(groups, dim=0), v.repeat_interleave(groups, dim=0)  # [Hq, L+T, d]
        scores = (q @ k.transpose(1, 2)).float() / math.sqrt(c.head_dim)  # [Hq, T, L+T]
        scores = scores.masked_fill(~mask[None], float("-inf"))
        out = (scores.softmax(-1).to(v.dtype) @ v).transpose(0, 1).reshape(T, -1)  # [T, Hq*d]
        return self.self_attn.o_proj(out)

    def forward(self, x, cos, sin, cache, mask):  # x [T, H] -> [T, H]
        x = x + self.attention(self.input_layernorm(x), cos, sin, cache, mask)
        h = self.post_attention_layernorm(x)
        return x + self.mlp.down_proj(F.silu(self.mlp.gate_proj(h)) * self.mlp.up_proj(h))


class EagleHead(nn.Module):
    """The head's own weights (the LM head is the target's, passed to :meth:`logits`)."""

    def __init__(self, config: EagleHeadConfig, meta: dict | None = None):
        super().__init__()
        self.config = config
        self.meta = dict(meta or {})  # what the head was made for and how (target, tokenizer, training)
        self.embed_tokens = nn.Embedding(config.vocab_size, config.hidden_size)
        self.fc = nn.Linear(2 * config.hidden_size, config.hidden_size, bias=True)
        self.layers = nn.ModuleList([EagleLayer(config, first=(i == 0)) for i in range(config.num_layers)])

    @property
    def trained_depth(self) -> int | None:
        """The drafting depth the head was trained to (``train_eagle.py --unroll``); None when its
        metadata does not record its training."""
        training = self.meta.get("training")
        recipe = json.loads(training) if isinstance(training, str) else training or {}
        return recipe.get("unroll")

    def rope(self, positions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:  # [T] -> cos, sin [T, d]
        d = self.config.head_dim
        inv_freq = 1.0 / (self.config.rope_theta ** (torch.arange(0, d, 2, dtype=torch.float32) / d))  # [d/2]
        freqs = positions.float()[:, None] * inv_freq[None]  # [T, d/2]
        emb = torch.cat([freqs, freqs], dim=-1)  # [T, d]
        dtype = self.fc.weight.dtype
        return emb.cos().to(dtype), emb.sin().to(dtype)

    def forward(self, tokens: torch.Tensor, hidden: torch.Tensor, positions: torch.Tensor,
                caches: Sequence[LayerCache] | None = None, mask: torch.Tensor | None = None) -> torch.Tensor:
        """Features of T pairs: ``tokens [T]`` (x_{i+1}), ``hidden [T, H]`` (h_i, or a parent's feature),
        ``positions [T]`` (i), ``mask [T, L + T]`` bool over the cache and the new pairs (default causal)
        -> ``[T, H]``. With ``caches`` (one per layer) the pairs' keys and values are appended there."""
        T = tokens.shape[0]
        cached = 0 if caches is None or caches[0].keys is None else caches[0].keys.shape[1]
        if mask is None:
            mask = torch.ones(T, cached + T, dtype=torch.bool).tril(cached)
        x = self.fc(torch.cat([self.embed_tokens(tokens), hidden.to(self.fc.weight.dtype)], dim=-1))  # [T, H]
        cos, sin = self.rope(positions)
        for i, layer in enumerate(self.layers):
            x = layer(x, cos, sin, None if caches is None else caches[i], mask.to(x.device))
        return x

    def session(self) -> "EagleHeadSession":
        return EagleHeadSession(self)

    def save(self, directory: str | Path) -> Path:
        """``directory/model.safetensors`` (Hugging Face names, :data:`META_KEY` metadata) and ``config.json``:
        the head directory TensorRT-LLM's EAGLE converter reads (``--eagle_model_dir``)."""
        out = Path(directory)
        out.mkdir(parents=True, exist_ok=True)
        tensors = {k: v.detach().contiguous() for k, v in self.state_dict().items()}
        meta = {"format_version": FORMAT_VERSION, "config": asdict(self.config), **self.meta}
        save_file(tensors, str(out / WEIGHTS_FILE), metadata={META_KEY: json.dumps(meta, sort_keys=True)})
        (out / CONFIG_FILE).write_text(json.dumps(self.config.llama_config(self.fc.weight.dtype), indent=2))
        return out

    def save_without_embedding(self, path: str | Path, dtype: torch.dtype = torch.bfloat16) -> Path:
        """One ``.safetensors`` file of the head's own weights in ``dtype``, without the embedding (the
        target's, frozen): what the package ships. :func:`load_eagle_head` takes it with the target's
        ``embedding``; :meth:`save` of the loaded head writes the converter's directory."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        tensors = {k: v.detach().to(dtype).contiguous() for k, v in self.state_dict().items() if k != EMBEDDING}
        meta = {"format_version": FORMAT_VERSION, "config": asdict(self.config), **self.meta}
        save_file(tensors, str(path), metadata={META_KEY: json.dumps(meta, sort_keys=True)})
        return path


class EagleHeadSession:
    """The head's KV cache for one sequence: the context pairs first, then (while drafting) tree nodes."""

    def __init__(self, head: EagleHead):
        self.head = head
        self.caches = [LayerCache() for _ in head.layers]
        self.cached_len = 0

    @torch.inference_mode()
    def forward(self, tokens: Sequence[int], hidden: torch.Tensor, positions: Sequence[int],
                mask: torch.Tensor | None = None) -> torch.Tensor:
        """Append T pairs (``tokens [T]``, ``hidden [T, H]``, ``positions [T]``, ``mask [T, cached_len + T]``)
        and return their features ``[T, H]``."""
        device = self.head.fc.weight.device
        out = self.head(torch.tensor(list(tokens), dtype=torch.long, device=device), hidden.to(device),
                        torch.tensor(list(positions), dtype=torch.long, device=device), self.caches, mask)
        self.cached_len += len(tokens)
        return out

    def retain(self, keep: int) -> None:
        """Keep the first ``keep`` cache entries (the context pairs; tree entries go)."""
        if not 0 <= keep <= self.cached_len:
            raise ValueError(f"retain({keep}) is outside the head's cache of {self.cached_len} entries")
        for c in self.caches:
            if c.keys is not None:
                c.keys, c.values = c.keys[:, :keep], c.values[:, :keep]
        self.cached_len = keep


def random_eagle_head(target_model, num_layers: int = 1, seed: int = 0, meta: dict | None = None) -> EagleHead:
    """An untrained head for a transformers Llama target: its embedding copied (EAGLE shares it), the
    rest random (small weights, so features stay in the target's range). For tests and as training's start."""
    config = EagleHeadConfig.like_target(target_model.config, num_layers)
    generator = torch.Generator().manual_seed(seed)
    head = EagleHead(config, meta)
    with torch.no_grad():
        for name, p in head.named_parameters():
            if name.endswith("layernorm.weight"):
                p.fill_(1.0)
            else:
                p.copy_(torch.randn(p.shape, generator=generator) * 0.05)
        head.embed_tokens.weight.copy_(target_model.get_input_embeddings().weight.float())
    dtype = next(target_model.parameters()).dtype
    return head.to(dtype).eval()


def head_differences(config: EagleHeadConfig, meta: dict, hidden_size: int, vocab_size: int,
                     tokenizer: str | None) -> list[str]:
    """Every way a head of ``config`` / ``meta`` does not fit a target; empty when it fits."""
    out = []
    if config.hidden_size != hidden_size:
        out.append(f"hidden size: head {config.hidden_size}, target {hidden_size} (the head reads the target's "
                   f"hidden states and shares its LM head)")
    if config.vocab_size != vocab_size:
        out.append(f"vocabulary: head {config.vocab_size} tokens, target {vocab_size}")
    recorded = meta.get("tokenizer")
    if tokenizer is not None and recorded is not None and recorded != tokenizer:
        out.append(f"tokenizer fingerprint: head {recorded}, target's tokenizer {tokenizer}")
    return out


def read_head_meta(path: str | Path) -> tuple[Path, EagleHeadConfig, dict]:
    """(weights file, config, metadata) of a head directory or its ``model.safetensors``."""
    path = Path(path)
    weights = path / WEIGHTS_FILE if path.is_dir() else path
    if not weights.is_file():
        raise FileNotFoundError(f"no EAGLE head at {path}: give a directory made by EagleHead.save (or "
                                f"build_scripts/train_eagle.py) or its {WEIGHTS_FILE}")
    with safe_open(str(weights), "pt") as f:
        raw = (f.metadata() or {}).get(META_KEY)
    if raw is None:
        raise ValueError(f"{weights} has no {META_KEY!r} metadata: it is not an EAGLE head saved by this package")
    meta = json.loads(raw)
    if meta.get("format_version") != FORMAT_VERSION:
        raise ValueError(f"{weights} has EAGLE head format {meta.get('format_version')}, this version reads "
                         f"{FORMAT_VERSION}")
    config = EagleHeadConfig(**meta.pop("config"))
    meta.pop("format_version")
    return weights, config, meta


def load_eagle_head(path: str | Path, *, hidden_size: int, vocab_size: int, tokenizer: str | None = None,
                    dtype: torch.dtype | None = None, device: str | torch.device = "cpu",
                    embedding: torch.Tensor | None = None) -> EagleHead:
    """Load a head for a target of ``hidden_size`` and ``vocab_size`` (and, when given, the tokenizer
    fingerprint ``tokenizer``); raises ValueError listing every difference. ``embedding`` [V, H] (the
    target's) completes a file saved without it (:meth:`EagleHead.save_without_embedding`)."""
    weights, config, meta = read_head_meta(path)
    problems = head_differences(config, meta, hidden_size, vocab_size, tokenizer)
    if problems:
        raise ValueError(f"the EAGLE head {weights} does not fit this target: " + "; ".join(problems))
    head = EagleHead(config, meta)
    state = load_file(str(weights))
    if EMBEDDING not in state:
        if embedding is None:
            raise ValueError(f"{weights} stores no {EMBEDDING} (a head saved without the target's embedding): load "
                             f"it with the target's embedding (load_eagle_head(..., embedding=...))")
        state[EMBEDDING] = embedding.to(next(iter(state.values())).dtype)
    missing = sorted(set(head.state_dict()) - set(state))
    extra = sorted(set(state) - set(head.state_dict()))
    if missing or extra:
        raise ValueError(f"{weights}: tensors missing {missing}, unexpected {extra} for a {config.num_layers}-layer head")
    head.load_state_dict(state)
    return head.to(device=device, dtype=dtype or next(iter(state.values())).dtype).eval()

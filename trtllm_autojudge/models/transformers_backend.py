"""Transformers backend: any ``*ForCausalLM`` whose ``.model`` returns final-norm hidden states.

Runs on CPU or GPU (the model's device). Trees use a 4-D boolean attention mask and explicit
position ids; chains use the model's own causal mask, exactly as ``generate`` does.
"""
from __future__ import annotations

import hashlib
from typing import Sequence

import torch
from transformers import DynamicCache, PreTrainedModel

from .protocol import ForwardOutput, check_forward, check_retain


def weights_fingerprint(tensors) -> str:
    """16 hex digits of SHA-256 over named tensors ``(name, tensor)`` as they compute: names, dtypes,
    shapes and bytes."""
    h = hashlib.sha256()
    for name, t in tensors:
        t = t.detach().contiguous().cpu()
        h.update(f"{name}|{t.dtype}|{tuple(t.shape)}".encode())
        h.update(t.view(-1).view(torch.uint8).numpy().tobytes() if t.numel() else b"")
    return h.hexdigest()[:16]


class TransformersLM:
    """A causal LM wrapped for the speculative loop (see :class:`.protocol.LanguageModel`)."""

    def __init__(self, model: PreTrainedModel, eos_token_ids: Sequence[int] | None = None, name: str = ""):
        if not hasattr(model, "model") or not hasattr(model, "lm_head"):
            raise TypeError(f"{type(model).__name__} has no .model/.lm_head: pass a *ForCausalLM model")
        self.model = model.eval()
        self.name = name or getattr(model.config, "_name_or_path", "") or type(model).__name__
        self.vocab_size = int(model.config.vocab_size)
        self.hidden_size = int(model.config.hidden_size)
        if eos_token_ids is None:
            eos = model.generation_config.eos_token_id if model.generation_config else model.config.eos_token_id
            eos_token_ids = [] if eos is None else ([eos] if isinstance(eos, int) else list(eos))
        self.eos_token_ids = tuple(int(e) for e in eos_token_ids)
        # artefacts merged into the weights -> the dtype they were made in (None: not recorded, float32)
        self.artifact_dtypes: dict[str, str | None] = {}
        self._head: torch.nn.Module | None = None  # None: the model's own LM head

    @property
    def head(self) -> torch.nn.Module:
        """hidden [T, H] -> logits [T, V] of sessions: the model's LM head, or the one given to :meth:`use_head`."""
        return self.model.lm_head if self._head is None else self._head

    def use_head(self, head: torch.nn.Module | None) -> None:
        """Compute session logits with ``head`` (e.g. a :class:`.vocab_subset.SubsetHead`; None: the LM head).

        Hidden states are unchanged; ``.model`` keeps its own LM head (training, batched mining).
        """
        self._head = head

    @property
    def device(self) -> torch.device:
        return next(self.model.parameters()).device

    @property
    def dtype(self) -> torch.dtype:
        """The compute dtype of the weights (logits and hidden states are returned as float32)."""
        return next(self.model.parameters()).dtype

    def session(self) -> "TransformersSession":
        return TransformersSession(self)

    def fingerprint(self) -> str:
        """16 hex digits of SHA-256 over the weights as they compute (names, dtypes, shapes, bytes) and
        the session head's tensors: two models with the same fingerprint decode alike. Result files
        and judge certificates record it (:func:`..evaluation.certificate.pair_fingerprint`)."""
        tensors = list(self.model.named_parameters())
        if self._head is not None:
            tensors += [(f"head.{k}", v) for k, v in self._head.state_dict().items()]
        return weights_fingerprint(tensors)


class TransformersSession:
    """KV cache of one sequence on a :class:`TransformersLM`."""

    def __init__(self, lm: TransformersLM):
        self.lm = lm
        self.cache = DynamicCache(config=lm.model.config)
        self.cached_len = 0

    @torch.inference_mode()
    def forward(
        self,
        tokens: Sequence[int],  # [T]
        positions: Sequence[int] | None = None,  # [T]
        mask: torch.Tensor | None = None,  # [T, cached_len + T] bool, True = attend
    ) -> ForwardOutput:
        T = len(tokens)
        check_forward(self.cached_len, T, positions, mask)
        device = self.lm.device
        ids = torch.tensor([list(tokens)], dtype=torch.long, device=device)  # [1, T]
        kwargs = {}
        if positions is not None:
            kwargs["position_ids"] = torch.tensor([list(positions)], dtype=torch.long, device=device)  # [1, T]
        if mask is not None:
            kwargs["attention_mask"] = mask.to(device=device, dtype=torch.bool)[None, None]  # [1, 1, T, L+T]
        out = self.lm.model.model(input_ids=ids, cache=self.cache, use_cache=True, **kwargs)
        hidden = out.last_hidden_state[0]  # [T, H], after the final norm
        logits = self.lm.head(hidden)  # [T, V]
        self.cached_len += T
        return ForwardOutput(logits=logits.float(), hidden=hidden.float())

    def retain(self, keep: int, slots: Sequence[int] = ()) -> None:
        slots = list(slots)
        check_retain(self.cached_len, keep, slots)
        new_len = keep + len(slots)
        contiguous = slots == list(range(keep, new_len))
        index = None if contiguous else torch.tensor(list(range(keep)) + slots, dtype=torch.long, device=self.lm.device)
        for layer in self.cache.layers:  # [1, heads, cached_len, head_dim] each
            if contiguous:
                layer.keys, layer.values = layer.keys[..., :new_len, :], layer.values[..., :new_len, :]
            else:
                layer.keys, layer.values = layer.keys.index_select(-2, index), layer.values.index_select(-2, index)
        self.cached_len = keep + len(slots)

"""A minimal LoRA: low-rank updates ``W + (alpha / r) * B @ A`` on chosen Linear layers.

Training wraps each target Linear in :class:`LoRALinear` (base frozen, ``A``/``B`` trainable);
shipping saves only ``A`` and ``B`` (:func:`save_adapter`); loading folds them into the base weights
(:func:`merge_adapter`), so inference runs the plain model at no extra cost.

Adapter file (safetensors): ``<module path>.lora_A`` [r, in] and ``<module path>.lora_B`` [out, r]
for every adapted Linear (e.g. ``model.layers.3.self_attn.q_proj``), optionally full tensors under
a parameter's own name (e.g. ``model.norm.weight``) that replace it; metadata ``rank``, ``alpha``,
``base`` (the model it was trained on) and free-form training notes.
"""
from __future__ import annotations

import math
from pathlib import Path

import torch
from safetensors import safe_open
from safetensors.torch import save_file
from torch import nn

DEFAULT_TARGETS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")


class LoRALinear(nn.Module):
    """``base(x) + scale * x @ A.T @ B.T`` with ``base`` frozen."""

    def __init__(self, base: nn.Linear, rank: int, alpha: float):
        super().__init__()
        self.base, self.scale = base, alpha / rank
        base.weight.requires_grad_(False)
        self.lora_A = nn.Parameter(torch.empty(rank, base.in_features))  # [r, in]
        self.lora_B = nn.Parameter(torch.zeros(base.out_features, rank))  # [out, r]: starts as a no-op
        nn.init.kaiming_uniform_(self.lora_A, a=math.sqrt(5))

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # x: [..., in] -> [..., out]
        return self.base(x) + (x @ self.lora_A.T @ self.lora_B.T) * self.scale


def attach_lora(model: nn.Module, rank: int, alpha: float, targets=DEFAULT_TARGETS,
                layers: list[int] | None = None) -> dict[str, LoRALinear]:
    """Wrap every Linear named in ``targets`` (in the decoder layers ``layers``, default all).

    Freezes the whole model first; returns the wrappers by module path.
    """
    for p in model.parameters():
        p.requires_grad_(False)
    wrapped = {}
    for path, module in list(model.named_modules()):
        name = path.rsplit(".", 1)[-1]
        if name not in targets or not isinstance(module, nn.Linear):
            continue
        if layers is not None and not any(f".layers.{i}." in f".{path}." for i in layers):
            continue
        parent = model.get_submodule(path.rsplit(".", 1)[0])
        wrapped[path] = LoRALinear(module, rank, alpha)
        setattr(parent, name, wrapped[path])
    if not wrapped:
        raise ValueError(f"no Linear named {targets} found: attach_lora needs a Llama-style model")
    return wrapped


def adapter_tensors(wrapped: dict[str, LoRALinear]) -> dict[str, torch.Tensor]:
    return {f"{path}.{k}": getattr(m, k).detach().contiguous() for path, m in wrapped.items() for k in ("lora_A", "lora_B")}


def adapter_metadata(path: str | Path) -> dict[str, str]:
    """The metadata of the adapter file at ``path``."""
    with safe_open(str(path), framework="pt") as f:
        return f.metadata() or {}


def load_factors(wrapped: dict[str, LoRALinear], path: str | Path) -> None:
    """Copy the LoRA factors of the adapter at ``path`` into ``wrapped`` (same modules and rank), to
    continue training it."""
    meta = adapter_metadata(path)
    first = next(iter(wrapped.values()))
    if "rank" not in meta or float(meta["alpha"]) / int(meta["rank"]) != first.scale:
        raise ValueError(f"{path} was made with alpha {meta.get('alpha')} and rank {meta.get('rank')}: pass the same --rank and --alpha")
    with safe_open(str(path), framework="pt") as f:
        for module_path, m in wrapped.items():
            for k in ("lora_A", "lora_B"):
                name = f"{module_path}.{k}"
                if name not in f.keys():
                    raise ValueError(f"{path} has no {name}: make the adapter with the same modules to continue it")
                value = f.get_tensor(name)
                if value.shape != getattr(m, k).shape:
                    raise ValueError(f"{path}: {name} is {tuple(value.shape)}, the new adapter's is "
                                     f"{tuple(getattr(m, k).shape)}: pass the same --rank ({meta.get('rank')})")
                getattr(m, k).data.copy_(value.float())


def save_adapter(path: str | Path, wrapped: dict[str, LoRALinear], rank: int, alpha: float, base: str,
                 factor_dtype: torch.dtype = torch.float16, full: dict[str, torch.Tensor] | None = None, **notes: str) -> None:
    """Write the LoRA factors (in ``factor_dtype``) and the ``full`` replacement tensors (float32);
    ``notes`` go into the metadata as text (e.g. ``dtype``: the compute dtype it was trained in)."""
    tensors = {k: v.to(factor_dtype) for k, v in adapter_tensors(wrapped).items()}
    tensors.update({k: v.detach().float().contiguous() for k, v in (full or {}).items()})
    metadata = {"rank": str(rank), "alpha": str(alpha), "base": base, **{k: str(v) for k, v in notes.items()}}
    save_file(tensors, str(path), metadata=metadata)


@torch.no_grad()
def merge_adapter(model: nn.Module, path: str | Path) -> dict[str, str]:
    """Fold the adapter at ``path`` into ``model`` in place (LoRA factors into Linear weights, full
    tensors over their parameters); returns the adapter's metadata."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"adapter file {path} does not exist")
    with safe_open(str(path), framework="pt") as f:
        meta = f.metadata() or {}
        if "rank" not in meta or "alpha" not in meta:
            raise ValueError(f"{path} is not a LoRA adapter of this project (no rank/alpha metadata)")
        scale = float(meta["alpha"]) / int(meta["rank"])
        keys = set(f.keys())
        for module_path in sorted({k.rsplit(".", 1)[0] for k in keys if k.endswith((".lora_A", ".lora_B"))}):
            try:
                linear = model.get_submodule(module_path)
            except AttributeError:
                raise ValueError(f"{path}: the model has no module {module_path}; the adapter was made for {meta.get('base')}") from None
            a, b = f.get_tensor(f"{module_path}.lora_A"), f.get_tensor(f"{module_path}.lora_B")  # [r, in], [out, r]
            w = linear.weight  # [out, in]
            if a.shape[1] != w.shape[1] or b.shape[0] != w.shape[0] or a.shape[0] != b.shape[1]:
                raise ValueError(f"{path}: {module_path} has A {tuple(a.shape)} and B {tuple(b.shape)}, "
                                 f"which do not fit the weight {tuple(w.shape)}")
            w += (b.float() @ a.float()).to(w.dtype) * scale
        params = dict(model.named_parameters())
        for name in sorted(k for k in keys if not k.endswith((".lora_A", ".lora_B"))):
            value = f.get_tensor(name)
            if name not in params or params[name].shape != value.shape:
                raise ValueError(f"{path}: tensor {name} {tuple(value.shape)} matches no parameter of the model")
            params[name].copy_(value)
    return meta

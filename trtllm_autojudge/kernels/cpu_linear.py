"""bfloat16 linear layers with pre-packed weights for CPU decoding (oneDNN's blocked layout).

On a CPU, ``nn.Linear`` in bf16 re-lays its weight out for oneDNN on every call; at batch 1 that
halves the bandwidth a decode step gets from its weights. :class:`PackedLinear` lays the weight out
once (``torch.ops.mkldnn._reorder_linear_weight``, what inductor's CPU weight freezing uses) and
calls the same oneDNN kernel (``_linear_pointwise``): the outputs are bit-identical to
``nn.Linear`` in bf16 (tested), so lossless decoding and judge features do not change. float32 is
left alone: there the packed kernel rounds differently and does not pay at batch 1.
"""
from __future__ import annotations

from typing import Callable, Iterable

import torch
from torch import nn


def can_pack(dtype: torch.dtype, device: torch.device | str) -> bool:
    """True for bf16 on a CPU where oneDNN computes bf16 (an AVX-512 CPU, and a torch build with oneDNN)."""
    return (dtype == torch.bfloat16 and torch.device(device).type == "cpu" and torch.backends.mkldnn.is_available()
            and hasattr(torch.ops.mkldnn, "_reorder_linear_weight") and torch.ops.mkldnn._is_mkldnn_bf16_supported())


def check_input(module: nn.Module, x: torch.Tensor, packed: torch.Tensor) -> None:
    """Refuse what a packed weight cannot compute: another dtype or device than it was packed for
    (the model cast or moved after packing), or an input that needs a gradient."""
    name = type(module).__name__
    if x.dtype != module.weight.dtype or module.weight.dtype != packed.dtype or x.device.type != "cpu":
        raise RuntimeError(f"{name} packed for {packed.dtype} on cpu got {x.dtype} on {x.device}: "
                           "cast or move the model before packing it (models/loading.load_pair)")
    if torch.is_grad_enabled() and x.requires_grad:  # the packed op records no gradient
        raise RuntimeError(f"{name} is for inference: run under torch.no_grad() or train an unpacked model")


class PackedLinear(nn.Module):
    """Inference-only ``nn.Linear`` whose weight is also kept in oneDNN's layout.

    ``weight`` / ``bias`` stay the original parameters (shared with ties, counted by
    ``parameters()``); casting or moving the module afterwards is refused at the next call.
    """

    def __init__(self, linear: nn.Linear):
        super().__init__()
        if not can_pack(linear.weight.dtype, linear.weight.device):
            raise ValueError(f"PackedLinear needs a bf16 CPU weight with oneDNN, got {linear.weight.dtype} "
                             f"on {linear.weight.device}")
        self.in_features, self.out_features = linear.in_features, linear.out_features
        self.weight, self.bias = linear.weight, linear.bias  # [out, in], [out] or None
        self.packed = torch.ops.mkldnn._reorder_linear_weight(linear.weight.detach(), 1)  # not a parameter or buffer

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # x [..., in] -> [..., out]
        check_input(self, x, self.packed)
        bias = None if self.bias is None else self.bias.detach()
        y = torch.ops.mkldnn._linear_pointwise(x.reshape(-1, self.in_features).contiguous(), self.packed, bias,
                                               "none", [], "")  # [N, out]
        return y.reshape(*x.shape[:-1], self.out_features)

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, bias={self.bias is not None}"


def pack_linears(*modules: nn.Module) -> int:
    """Replace every bf16 CPU ``nn.Linear`` under ``modules`` by a :class:`PackedLinear` in place.

    A linear shared between modules (the embedded draft's LM head is the target's) becomes one
    shared packed module. Other dtypes and devices are left as they are. Returns the number packed.
    """
    return replace_linears(modules, lambda linear: can_pack(linear.weight.dtype, linear.weight.device), PackedLinear)


def replace_linears(modules: Iterable[nn.Module], wanted: Callable[[nn.Linear], bool],
                    make: Callable[[nn.Linear], nn.Module]) -> int:
    """Replace every plain ``nn.Linear`` under ``modules`` for which ``wanted`` holds by ``make(it)``, in
    place; a linear shared between parents gets one shared replacement. Returns the number replaced."""
    made: dict[int, nn.Module] = {}

    def visit(parent: nn.Module) -> None:
        for name, child in parent.named_children():
            if type(child) is nn.Linear and wanted(child):
                if id(child) not in made:
                    made[id(child)] = make(child)
                setattr(parent, name, made[id(child)])
            else:
                visit(child)

    for module in modules:
        visit(module)
    return len(made)

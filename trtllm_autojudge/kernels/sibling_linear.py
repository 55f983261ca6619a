"""Sibling projections as one packed matmul: q/k/v, and the MLP's gate/up, for bf16 CPU decoding.

A Llama-style layer reads the same normed hidden state into three attention projections and two
MLP projections: five small matmuls a layer, each a separate oneDNN call at batch 1. Stacking the
siblings' weights (``[sum of out, in]``) makes two larger calls, which read their weights faster
(measured in docs/cpu.md). Each output column is the same dot product over the input, so the
results are **bit-identical** to the separate :class:`.cpu_linear.PackedLinear` calls (tested).

The transformers model is unchanged: each projection is still a module of its own
(:class:`SiblingLinear`), called by the model's own forward. The first sibling called with a new
input computes the stacked matmul and keeps its slices; the others called with that same tensor
(identity and version checked) take theirs. Called with anything else, a sibling computes again,
so the call order never changes a result.
"""
from __future__ import annotations

import torch
from torch import nn

from .cpu_linear import PackedLinear, check_input

SIBLING_NAMES = (("q_proj", "k_proj", "v_proj"), ("gate_proj", "up_proj"))  # Llama, Mistral, Qwen2 naming


class SiblingGroup:
    """The stacked packed weight of linears that read one input, and the last input's outputs."""

    def __init__(self, members: list[PackedLinear]):
        self.in_features = members[0].in_features
        self.splits = [m.out_features for m in members]
        weight = torch.cat([m.weight.detach() for m in members])  # [sum(splits), in]
        self.packed = torch.ops.mkldnn._reorder_linear_weight(weight, 1)
        biases = [m.bias for m in members]
        self.bias = None if all(b is None for b in biases) else torch.cat(
            [b.detach() if b is not None else torch.zeros(n, dtype=weight.dtype) for b, n in zip(biases, self.splits)])
        self._input: torch.Tensor | None = None
        self._version: int | None = None
        self._outputs: list[torch.Tensor | None] = []

    def output(self, x: torch.Tensor, index: int) -> torch.Tensor:  # x [..., in] -> [..., splits[index]]
        version = None if x.is_inference() else x._version  # inference tensors keep no version counter
        if x is not self._input or version != self._version or self._outputs[index] is None:
            y = torch.ops.mkldnn._linear_pointwise(x.reshape(-1, self.in_features).contiguous(), self.packed,
                                                   self.bias, "none", [], "")  # [N, sum(splits)]
            self._outputs = [part.reshape(*x.shape[:-1], part.shape[-1]) for part in y.split(self.splits, -1)]
            self._input, self._version = x, version
        out, self._outputs[index] = self._outputs[index], None
        if not any(o is not None for o in self._outputs):
            self._input = None  # all taken: hold nothing between steps
        return out


class SiblingLinear(nn.Module):
    """One member of a :class:`SiblingGroup`; keeps its own ``weight`` / ``bias`` parameters."""

    def __init__(self, linear: PackedLinear, group: SiblingGroup, index: int):
        super().__init__()
        self.in_features, self.out_features = linear.in_features, linear.out_features
        self.weight, self.bias = linear.weight, linear.bias  # [out, in], [out] or None
        self.group, self.index = group, index

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # x [..., in] -> [..., out]
        check_input(self, x, self.group.packed)
        return self.group.output(x, self.index)

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, sibling {self.index} of {len(self.group.splits)}"


def fuse_siblings(*modules: nn.Module) -> int:
    """Stack every set of :data:`SIBLING_NAMES` projections that are all :class:`PackedLinear` of one
    input width, in place. Linears shared with another parent are left alone. Returns the groups made."""
    parents: dict[int, set[int]] = {}  # id(child) -> ids of the distinct modules holding it
    for module in modules:
        for sub in module.modules():
            for child in sub.children():
                parents.setdefault(id(child), set()).add(id(sub))
    made = 0
    for module in modules:
        for sub in module.modules():  # a module shared by two models is stacked on its first visit
            for names in SIBLING_NAMES:
                members = [getattr(sub, n, None) for n in names]
                if not all(type(m) is PackedLinear and len(parents[id(m)]) == 1 for m in members):
                    continue
                if len({(m.in_features, m.weight.dtype) for m in members}) != 1:
                    continue
                group = SiblingGroup(members)
                for i, (name, m) in enumerate(zip(names, members)):
                    setattr(sub, name, SiblingLinear(m, group, i))
                made += 1
    return made

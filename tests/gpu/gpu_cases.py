"""Random inputs for the kernel checks of tests/gpu, and their reference answers.

Judge logits are kept at least ``MARGIN`` away from every cut (the threshold is put in a wide gap
of the judge logits), so the kernels' float32 accumulation, in any order, takes the decisions of
the float64 reference. Words as in trtllm_autojudge.spec.acceptance.
"""
from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/: packed_steps

import packed_steps  # noqa: E402

from trtllm_autojudge.decoding.rules import judge_relaxed  # noqa: E402
from trtllm_autojudge.decoding.tree import DraftTree  # noqa: E402
from trtllm_autojudge.spec.acceptance import Acceptance, accept_tree  # noqa: E402

MARGIN = 1e-3
DTYPES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}


@dataclass
class AcceptCase:
    name: str
    target_logits: torch.Tensor  # [B*(N+1), V]
    target_hidden: torch.Tensor  # [B*(N+1), Ht]
    draft_hidden: torch.Tensor | None  # [B*(N+1), Hd]
    draft_tokens: torch.Tensor  # [B, N] int32
    draft_lens: torch.Tensor  # [B] int32
    paths: torch.Tensor  # [B, P, D+1] int32
    threshold: torch.Tensor  # [B] float32
    judge_weight: torch.Tensor  # [F] float32
    judge_bias: float

    def op_args(self) -> tuple:
        return (self.target_logits, self.target_hidden, self.draft_tokens, self.draft_lens, self.paths,
                self.threshold, self.judge_weight, self.judge_bias, self.draft_hidden)


def _cut_in_a_gap(judge_logit: np.ndarray) -> float:
    """A threshold whose logit lies in a gap of the judge logits at least 20 * MARGIN wide, the one
    nearest their median (so some mismatches are judged and some rejected)."""
    finite = np.sort(judge_logit[np.isfinite(judge_logit)])
    values = np.concatenate([[finite[0] - 1.0], finite, [finite[-1] + 1.0]])
    gaps = np.diff(values)
    middles = (values[1:] + values[:-1]) / 2
    wide = np.flatnonzero(gaps > 20 * MARGIN)
    cut = middles[wide[np.argmin(np.abs(middles[wide] - np.median(finite)))]]
    return float(1.0 / (1.0 + np.exp(-cut)))


def judge_logits(case_hidden: torch.Tensor, draft_hidden: torch.Tensor | None, weight: torch.Tensor,
                 bias: float) -> np.ndarray:
    features = case_hidden.double() if draft_hidden is None else torch.cat([draft_hidden.double(),
                                                                            case_hidden.double()], -1)
    return (features @ weight.double().to(features.device) + bias).cpu().numpy()


def accept_case(name: str, batch: int, tree: DraftTree, vocab: int, dtype: str, ddt: bool, device: str,
                seed: int, hidden_dtype: str | None = None, target_hidden: int = 4096, draft_hidden: int = 2048
                ) -> AcceptCase:
    gen = torch.Generator(device=device).manual_seed(seed)
    rng = np.random.default_rng(seed)
    N = tree.num_nodes
    rows = batch * (N + 1)
    logits = torch.randn(rows, vocab, generator=gen, device=device).to(DTYPES[dtype])
    hdt = DTYPES[hidden_dtype or dtype]
    hidden = torch.randn(rows, target_hidden, generator=gen, device=device).to(hdt)
    draft = torch.randn(rows, draft_hidden, generator=gen, device=device).to(hdt) if ddt else None
    features = target_hidden + (draft_hidden if ddt else 0)
    weight = (torch.randn(features, generator=gen, device=device) * 10 / features ** 0.5).float()  # logits std ~10
    bias = float(rng.normal())
    target_argmax = logits.float().argmax(-1).reshape(batch, N + 1).cpu().numpy()
    draft_tokens = rng.integers(0, vocab, size=(batch, N))
    follow = rng.random((batch, N)) < 0.7  # the draft often agrees with the target along its tree
    parents = np.asarray(tree.parents[1:])
    draft_tokens = np.where(follow, target_argmax[:, parents], draft_tokens).astype(np.int32)
    judge = judge_logits(hidden, draft, weight, bias).reshape(batch, N + 1)
    threshold = np.array([_cut_in_a_gap(judge[b]) for b in range(batch)], np.float32)
    draft_lens = rng.choice([0, N, int(rng.integers(0, N + 1))], size=batch).astype(np.int32)
    paths = np.stack([tree.paths] * batch).astype(np.int32)
    as_tensor = lambda a: torch.from_numpy(np.ascontiguousarray(a)).to(device)  # noqa: E731
    return AcceptCase(name, logits, hidden, draft, as_tensor(draft_tokens), as_tensor(draft_lens), as_tensor(paths),
                      as_tensor(threshold), weight, bias)


def reference_accept(case: AcceptCase, numpy_argmax: bool = False) -> Acceptance:
    """accept_tree + judge_relaxed in float64; the target argmax from torch (first maximum), or from
    NumPy on the CPU when the logits hold NaN (numpy.argmax: the first NaN)."""
    B, N = case.draft_tokens.shape
    logits = case.target_logits.float()
    argmax = np.argmax(logits.cpu().numpy(), axis=1) if numpy_argmax else logits.argmax(-1).cpu().numpy()
    judge = judge_logits(case.target_hidden, case.draft_hidden, case.judge_weight, case.judge_bias)
    relaxed = judge_relaxed(judge.reshape(B, N + 1), case.threshold.cpu().numpy().astype(np.float64))
    return accept_tree(case.draft_tokens.cpu().numpy(), argmax.reshape(B, N + 1), case.paths.cpu().numpy(), relaxed,
                       case.draft_lens.cpu().numpy())


def chain(k: int) -> DraftTree:
    return DraftTree.chain(k)


def random_tree(nodes: int, seed: int) -> DraftTree:
    rng = np.random.default_rng(seed)
    parents = [-1] + [int(rng.integers(0, i)) for i in range(1, nodes + 1)]
    return DraftTree(tuple(parents), (0,) * (nodes + 1))


@dataclass
class PackedStep:
    """One step packed as TensorRT-LLM 1.2 does (tests/packed_steps.py, plugins/README.md "Logits mode")."""

    target_logits: torch.Tensor  # [L, V]
    target_hidden: torch.Tensor  # [L, Ht]
    input_ids: torch.Tensor  # [T] int32
    last_token_ids: torch.Tensor  # [L] int32
    request_types: torch.Tensor  # [S] int32, CPU (host_request_types)
    host_context_lengths: torch.Tensor  # [S] int32, CPU
    threshold: float
    judge_weight: torch.Tensor  # [F]
    judge_bias: float

    def op_args(self) -> tuple:
        return (self.target_logits, self.target_hidden, self.input_ids, self.last_token_ids, self.request_types,
                self.host_context_lengths, self.threshold, self.judge_weight, self.judge_bias, None)


def packed_step(requests: int, max_draft: int, vocab: int, dtype: str, device: str, seed: int,
                target_hidden: int = 4096) -> PackedStep:
    """``requests`` context requests (chunks up to 40 tokens, last chunks with up to ``max_draft``
    drafts) and a few generation beams; drafts follow the target's argmax often."""
    gen = torch.Generator(device=device).manual_seed(seed)
    rng = np.random.default_rng(seed)
    step = packed_steps.random_step(rng, vocab, max_drafts=max_draft, max_chunk=40, contexts=requests, generations=2)
    L = len(step.last_token_ids)
    logits = torch.randn(L, vocab, generator=gen, device=device).to(DTYPES[dtype])
    packed_steps.steer_drafts(step, logits.float().argmax(-1).cpu().numpy(), rng)
    hidden = torch.randn(L, target_hidden, generator=gen, device=device).to(DTYPES[dtype])
    weight = (torch.randn(target_hidden, generator=gen, device=device) * 10 / target_hidden ** 0.5).float()
    bias = float(rng.normal())
    judge = judge_logits(hidden, None, weight, bias)
    on_device = lambda a: torch.from_numpy(np.ascontiguousarray(a)).to(device)  # noqa: E731
    return PackedStep(logits, hidden, on_device(step.input_ids), on_device(step.last_token_ids),
                      torch.from_numpy(step.request_types), torch.from_numpy(step.host_context_lengths),
                      _cut_in_a_gap(judge), weight, bias)

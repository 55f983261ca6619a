"""Random inputs for the kernel checks of tests/gpu, and their reference answers.

Any setup of the compiled blocks (DT, DD, DT1, DT2, DD1, LS); the reference is JudgeRule + accept_tree
per sequence (tests/lookahead_reference.py). Judge logits are kept at least ``MARGIN`` away from
every cut (the threshold is put in a wide gap of the rule's judge logits), so the kernels' float32
accumulation, in any order, takes the decisions of the reference. Words as in
trtllm_autojudge.spec.acceptance.
"""
from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/: packed_steps, tree_steps

import lookahead_reference as ref  # noqa: E402
import packed_steps  # noqa: E402
import tree_steps  # noqa: E402

from trtllm_autojudge.decoding.tree import DraftTree  # noqa: E402
from trtllm_autojudge.judge.head import feature_dim  # noqa: E402
from trtllm_autojudge.ops.host_library import host_core  # noqa: E402
from trtllm_autojudge.spec.acceptance import Acceptance  # noqa: E402
from trtllm_autojudge.spec.judge_blocks import block_codes, reads_draft, window_tokens  # noqa: E402
from trtllm_autojudge.spec.tree_step import tree_parents  # noqa: E402

MARGIN = 1e-3
DTYPES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}
LOOKAHEAD_SETUP = "DD-DT-DT1-DT2-DD1-LS"  # every block: the lookahead judge shipped beside the task's judge


@dataclass
class AcceptCase:
    name: str
    setup: str  # the judge's blocks, '-'-joined
    tree: DraftTree  # every sequence's
    target_logits: torch.Tensor  # [B*(N+1), V]
    target_hidden: torch.Tensor  # [B*(N+1), Ht]
    draft_hidden: torch.Tensor | None  # [B*(N+1), Hd] when a block reads the draft
    greedy_child: torch.Tensor | None  # [B, N+1] int32 when a block looks ahead
    draft_tokens: torch.Tensor  # [B, N] int32
    draft_lens: torch.Tensor  # [B] int32
    paths: torch.Tensor  # [B, P, D+1] int32
    threshold: torch.Tensor | None  # [B] float32, in a wide gap of judge_logit (set by judged)
    judge_weight: torch.Tensor  # [F] float32
    judge_bias: float
    judge_logit: np.ndarray | None  # [B, N+1] float64: the rule's, +inf at the nodes it does not score (judged)
    min_run: int = 1  # the judge's minimum run (1: none)

    def op_args(self) -> tuple:  # trtllm_autojudge.ops.torch_ops.accept's
        return (self.target_logits, self.target_hidden, self.draft_tokens, self.draft_lens, self.paths,
                self.threshold, self.judge_weight, self.judge_bias, self.draft_hidden, self.setup, self.greedy_child,
                self.min_run)

    def extension_args(self) -> tuple:  # the CUDA binding's accept (plugins/torch/accept_op.cpp)
        return (self.target_logits, self.target_hidden, self.draft_tokens, self.draft_lens, self.paths,
                self.threshold, self.judge_weight, self.judge_bias, block_codes(self.setup).tolist(), self.min_run,
                self.draft_hidden, self.greedy_child)

    def on(self, device: str) -> "AcceptCase":
        """The same case with its tensors on ``device``."""
        move = lambda t: None if t is None else t.to(device)  # noqa: E731
        return AcceptCase(self.name, self.setup, self.tree, *(move(t) for t in (
            self.target_logits, self.target_hidden, self.draft_hidden, self.greedy_child, self.draft_tokens,
            self.draft_lens, self.paths, self.threshold, self.judge_weight)), self.judge_bias, self.judge_logit,
            self.min_run)


def _cut_in_a_gap(judge_logit: np.ndarray) -> float:
    return ref.cut_in_a_gap(judge_logit, MARGIN)


def random_weights(setup: str, target_hidden: int, draft_hidden: int, gen: torch.Generator, device: str
                   ) -> tuple[torch.Tensor, float]:
    """Folded weights [F] and a bias giving judge logits of standard deviation about 10."""
    F = feature_dim(setup, draft_hidden, target_hidden)
    weight = (torch.randn(F, generator=gen, device=device) * 10 / F ** 0.5).float()
    return weight, float(torch.randn(1, generator=gen, device=device).item())


def accept_case(name: str, batch: int, tree: DraftTree, vocab: int, dtype: str, setup: str, device: str,
                seed: int, hidden_dtype: str | None = None, target_hidden: int = 4096, draft_hidden: int = 2048,
                min_run: int = 1) -> AcceptCase:
    gen = torch.Generator(device=device).manual_seed(seed)
    rng = np.random.default_rng(seed)
    N = tree.num_nodes
    rows = batch * (N + 1)
    logits = torch.randn(rows, vocab, generator=gen, device=device).to(DTYPES[dtype])
    hdt = DTYPES[hidden_dtype or dtype]
    hidden = torch.randn(rows, target_hidden, generator=gen, device=device).to(hdt)
    draft = torch.randn(rows, draft_hidden, generator=gen, device=device).to(hdt) if reads_draft(setup) else None
    if draft is not None and window_tokens(setup):  # a lookahead judge never reads the deepest level's draft rows,
        deepest = [b * (N + 1) + n for b in range(batch) for n in range(1, N + 1) if tree.depths[n] == tree.max_depth]
        draft[deepest] = float("nan")  # which decoding never feeds
    weight, bias = random_weights(setup, target_hidden, draft_hidden, gen, device)
    target_argmax = logits.float().argmax(-1).reshape(batch, N + 1).cpu().numpy()
    draft_tokens = rng.integers(0, vocab, size=(batch, N))
    follow = rng.random((batch, N)) < 0.7  # the draft often agrees with the target along its tree
    parents = np.asarray(tree.parents[1:], np.int64)
    draft_tokens = np.where(follow, target_argmax[:, parents], draft_tokens).astype(np.int32)
    draft_lens = rng.choice([0, N, int(rng.integers(0, N + 1))], size=batch).astype(np.int32)
    paths = np.stack([tree.paths] * batch).astype(np.int32)
    as_tensor = lambda a: torch.from_numpy(np.ascontiguousarray(a)).to(device)  # noqa: E731
    greedy_child = as_tensor(np.stack([tree.greedy_child] * batch).astype(np.int32)) if window_tokens(setup) else None
    case = AcceptCase(name, setup, tree, logits, hidden, draft, greedy_child, as_tensor(draft_tokens),
                      as_tensor(draft_lens), as_tensor(paths), None, weight, bias, None, min_run)
    return judged(case)


def judged(case: AcceptCase) -> AcceptCase:
    """``case`` with the rule's judge logits of its inputs as they are now (after rows were changed),
    and each sequence's threshold in a wide gap of them."""
    draft_hidden = 0 if case.draft_hidden is None else case.draft_hidden.shape[1]
    head = ref.judge_head(case.setup, case.judge_weight.cpu().numpy(), case.judge_bias, case.target_hidden.shape[1],
                          draft_hidden, case.min_run)
    case.judge_logit = ref.tree_judge_logits(head, case.tree, case.target_logits, case.target_hidden,
                                             case.draft_hidden, case.draft_tokens.cpu().numpy(),
                                             case.draft_lens.cpu().numpy())
    threshold = np.array([_cut_in_a_gap(row) for row in case.judge_logit], np.float32)
    case.threshold = torch.from_numpy(threshold).to(case.target_logits.device)
    return case


def reference_accept(case: AcceptCase, numpy_argmax: bool = False) -> Acceptance:
    """The rule's judge logits (JudgeRule + accept_tree); the target argmax from torch (first
    maximum), or from NumPy on the CPU when the logits hold NaN (numpy.argmax: the first NaN)."""
    B, N = case.draft_tokens.shape
    logits = case.target_logits.float()
    argmax = np.argmax(logits.cpu().numpy(), axis=1) if numpy_argmax else logits.argmax(-1).cpu().numpy()
    return ref.accept(case.judge_logit, case.threshold.cpu().numpy(), case.draft_tokens.cpu().numpy(),
                      argmax.reshape(B, N + 1), case.paths.cpu().numpy(), case.draft_lens.cpu().numpy(), case.min_run)


def chain(k: int) -> DraftTree:
    return DraftTree.chain(k)


def random_tree(nodes: int, seed: int) -> DraftTree:
    rng = np.random.default_rng(seed)
    return ref.ranked_tree([-1] + [int(rng.integers(0, i)) for i in range(1, nodes + 1)])


@dataclass
class PackedStep:
    """One step packed as TensorRT-LLM 1.2 does (tests/packed_steps.py, plugins/README.md "Logits mode")."""

    setup: str  # the judge's blocks, '-'-joined
    target_logits: torch.Tensor  # [L, V]
    target_hidden: torch.Tensor  # [L, Ht]
    draft_hidden: torch.Tensor | None  # [L, Hd] when a block reads the draft
    input_ids: torch.Tensor  # [T] int32
    last_token_ids: torch.Tensor  # [L] int32
    request_types: torch.Tensor  # [S] int32, CPU (host_request_types)
    host_context_lengths: torch.Tensor  # [S] int32, CPU
    threshold: float
    judge_weight: torch.Tensor  # [F]
    judge_bias: float
    judge_logit: np.ndarray  # [L] float64: the rule's, +inf at the rows it does not score
    min_run: int = 1  # the judge's minimum run (1: none)

    def op_args(self) -> tuple:  # trtllm_autojudge.ops.torch_ops.rewrite_logits'
        return (self.target_logits, self.target_hidden, self.input_ids, self.last_token_ids, self.request_types,
                self.host_context_lengths, self.threshold, self.judge_weight, self.judge_bias, self.draft_hidden,
                self.setup, self.min_run)

    def extension_args(self) -> tuple:  # the CUDA binding's rewrite_logits
        return (self.target_logits, self.target_hidden, self.input_ids, self.last_token_ids, self.request_types,
                self.host_context_lengths, self.threshold, self.judge_weight, self.judge_bias,
                block_codes(self.setup).tolist(), self.min_run, self.draft_hidden)

    def sequences(self) -> tuple:  # input_ids, last_token_ids, request_types, host_context_lengths as NumPy
        return tuple(t.cpu().numpy() for t in (self.input_ids, self.last_token_ids, self.request_types,
                                               self.host_context_lengths))


def packed_step(requests: int, max_draft: int, vocab: int, dtype: str, device: str, seed: int, setup: str = "DT",
                target_hidden: int = 4096, draft_hidden: int = 2048, min_run: int = 1) -> PackedStep:
    """``requests`` context requests (chunks up to 40 tokens, last chunks with up to ``max_draft``
    drafts) and a few generation beams; drafts follow the target's argmax often."""
    gen = torch.Generator(device=device).manual_seed(seed)
    rng = np.random.default_rng(seed)
    step = packed_steps.random_step(rng, vocab, max_drafts=max_draft, max_chunk=40, contexts=requests, generations=2)
    L = len(step.last_token_ids)
    logits = torch.randn(L, vocab, generator=gen, device=device).to(DTYPES[dtype])
    packed_steps.steer_drafts(step, logits.float().argmax(-1).cpu().numpy(), rng)
    hidden = torch.randn(L, target_hidden, generator=gen, device=device).to(DTYPES[dtype])
    draft = torch.randn(L, draft_hidden, generator=gen, device=device).to(DTYPES[dtype]) if reads_draft(setup) else None
    weight, bias = random_weights(setup, target_hidden, draft_hidden, gen, device)
    head = ref.judge_head(setup, weight.cpu().numpy(), bias, target_hidden, draft_hidden, min_run)
    sequences = (step.input_ids, step.last_token_ids, step.request_types, step.host_context_lengths)
    judge = ref.packed_judge_logits(head, logits, hidden, draft, *sequences)
    on_device = lambda a: torch.from_numpy(np.ascontiguousarray(a)).to(device)  # noqa: E731
    return PackedStep(setup, logits, hidden, draft, on_device(step.input_ids), on_device(step.last_token_ids),
                      torch.from_numpy(step.request_types), torch.from_numpy(step.host_context_lengths),
                      _cut_in_a_gap(judge), weight, bias, judge, min_run)


@dataclass
class TreeCase:
    """One step of TensorRT-LLM's EAGLE engine (tests/tree_steps.py, plugins/README.md "Tree logits mode")."""

    setup: str  # target-only blocks, '-'-joined
    target_logits: torch.Tensor  # [L, V]
    target_hidden: torch.Tensor  # [L, Ht]
    draft_tokens: torch.Tensor  # [B, N] int32
    draft_lens: torch.Tensor  # [B] int32
    paths: torch.Tensor  # [B, N+1, D+1] int32
    threshold: torch.Tensor  # [B] float32, in a wide gap of the host core's judge logits
    judge_weight: torch.Tensor  # [F] float32
    judge_bias: float
    greedy_child: torch.Tensor | None  # [B, N+1] int32 when a block looks ahead
    min_run: int = 1  # the judge's minimum run (1: none)

    def op_args(self) -> tuple:  # trtllm_autojudge.ops.torch_ops.rewrite_tree_logits'
        return (self.target_logits, self.target_hidden, self.draft_tokens, self.draft_lens, self.paths,
                self.threshold, self.judge_weight, self.judge_bias, self.setup, self.greedy_child, self.min_run)

    def extension_args(self) -> tuple:  # the CUDA binding's rewrite_tree_logits
        return (self.target_logits, self.target_hidden, self.draft_tokens, self.draft_lens, self.paths,
                self.threshold, self.judge_weight, self.judge_bias, block_codes(self.setup).tolist(), self.min_run,
                self.greedy_child)

    def host_args(self) -> tuple:  # the host core's judge_tree_rows / rewrite_tree_logits tree arguments
        return tuple(t.cpu().numpy() for t in (self.draft_tokens, self.draft_lens, self.paths))


def host_array(t: torch.Tensor) -> np.ndarray:
    """A tensor for the host core: bfloat16 as its bits in uint16."""
    t = t.detach().cpu().contiguous()
    return t.view(torch.int16).numpy().view(np.uint16) if t.dtype == torch.bfloat16 else t.numpy()


def first_children(paths: np.ndarray, draft_lens: np.ndarray) -> np.ndarray:
    """[B, N+1] int32: each node's lowest-numbered child (-1 none): a stand-in for the greedy child."""
    B, M = paths.shape[0], paths.shape[1]
    out = np.full((B, M), -1, np.int32)
    for b in range(B):
        parents = tree_parents(paths[b], int(draft_lens[b]))
        for n in range(len(parents) - 1, 0, -1):
            if parents[n] >= 0:
                out[b, parents[n]] = n
    return out


def tree_case(vocab: int, dtype: str, device: str, seed: int, setup: str = "DT", max_nodes: int = 63,
              target_hidden: int = 4096, min_run: int = 1) -> TreeCase:
    """1-5 requests with random trees of up to ``max_nodes`` nodes (children often the target's argmax);
    the threshold in a gap of the host core's judge logits, so float32 sums in any order decide alike."""
    rng = np.random.default_rng(seed)
    gen = torch.Generator(device=device).manual_seed(seed)
    step = tree_steps.random_tree_step(rng, vocab, max_nodes=max_nodes, max_depth=8)
    logits = torch.from_numpy(step.logits).to(device=device, dtype=DTYPES[dtype])
    hidden = torch.randn(len(step.logits), target_hidden, generator=gen, device=device).to(DTYPES[dtype])
    weight, bias = random_weights(setup, target_hidden, 0, gen, device)
    greedy = first_children(step.paths, step.draft_lens) if window_tokens(setup) else None
    _, judge = host_core().judge_tree_rows(host_array(logits), host_array(hidden), step.draft_tokens, step.draft_lens,
                                           step.paths, weight.cpu().numpy(), bias, setup, greedy, min_run)
    on_device = lambda a: torch.from_numpy(np.ascontiguousarray(a)).to(device)  # noqa: E731
    threshold = torch.full((len(step.draft_lens),), _cut_in_a_gap(judge.astype(np.float64)), dtype=torch.float32,
                           device=device)
    return TreeCase(setup, logits, hidden, on_device(step.draft_tokens), on_device(step.draft_lens),
                    on_device(step.paths), threshold, weight, bias, None if greedy is None else on_device(greedy),
                    min_run)

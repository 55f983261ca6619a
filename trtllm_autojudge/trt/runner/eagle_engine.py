"""TensorRT-LLM 1.2's EAGLE engine with the AutoJudge tree logits mode, on the reference runtime (CPU,
transformers): the CPU specification of ``--route eagle`` (:mod:`trtllm_autojudge.trt.engine.eagle_spec`).

:meth:`ReferenceEagleEngine.step` takes the engine's inputs (:class:`.eagle_step.EagleStep`) and
returns its outputs, computing what ``EagleForCausalLM`` computes:

1. the base model over every request's input ids with the KV cache: a context request's prompt, a
   generation request's root and draft tree (attention and positions from ``draft_paths``; the step's
   ``spec_decoding_packed_mask`` and ``spec_decoding_position_offsets`` must describe the same tree);
   ``lm_logits [L, V]``: a context request's last row, every row of a generation request;
2. AutoJudge before the stock accept (the override of ``_eagle_fwd_helper``): the plugin's tree
   logits mode on ``lm_logits`` and the LM head's input rows, with ``draft_tokens``, ``draft_lens``,
   ``draft_paths`` and the per-request ``posterior_threshold`` (``torch.ops.autojudge.rewrite_tree_logits``:
   the host core here, the CUDA kernel on a GPU);
3. the stock ``EagleSampleAndAcceptDraftTokens``: top-1 of every row, then
   ``acceptDraftTokensByIdsWithPaths`` (:func:`trtllm_autojudge.spec.tree_step.stock_accept`):
   ``accepted_tokens``, ``num_accepted_tokens``, ``accepted_paths``;
4. the KV rewind the runtime does from ``accepted_paths`` (the accepted nodes' entries kept);
5. the EagleNets: the EAGLE head drafts the next tree from the target's hidden states of the tokens
   it consumed (the drafter of the CPU runtime, :class:`trtllm_autojudge.decoding.eagle_drafter.EagleDrafter`):
   ``next_draft_tokens``, ``next_draft_lens``, ``next_draft_paths``.
"""
from __future__ import annotations

import numpy as np
import torch

from ...decoding.dynamic_tree import DynamicTree
from ...decoding.eagle_drafter import EagleDrafter
from ...decoding.speculative import tree_forward
from ...decoding.tree import DraftTree
from ...judge.head import JudgeHead
from ...models.transformers_backend import TransformersLM
from ...ops.torch_ops import rewrite_tree_logits
from ...spec import tree_step
from ...spec.packed_step import CONTEXT_REQUEST
from ..engine.eagle_spec import check_tree_fits
from ..engine.routes import check_route_judge
from .eagle_step import EagleInput, EagleOutput, EagleStep, EagleStepOutputs, pad_paths, spec_decoding_inputs, tree_from_paths


class RequestState:
    """What the engine's KV cache holds for one request: the base model's and the head's caches."""

    def __init__(self, target: TransformersLM, drafter: EagleDrafter, prompt: list[int]):
        self.target_session = target.session()
        self.draft_session = drafter.start()
        self.tokens = list(prompt)


class ReferenceEagleEngine:
    """An EAGLE engine built for ``tree`` (a static tree, ``eagle_choices``, or an EAGLE-2 rule) with
    ``max_draft_len`` N and ``num_eagle_layers`` D; ``judge`` None builds the stock engine."""

    def __init__(self, target: TransformersLM, drafter: EagleDrafter, tree: DraftTree | DynamicTree, *,
                 max_draft_len: int, num_eagle_layers: int, judge: JudgeHead | None = None):
        check_tree_fits(tree, max_draft_len, num_eagle_layers, max_non_leaves_per_layer=max_draft_len)
        depth = tree.depth if isinstance(tree, DynamicTree) else tree.max_depth
        if judge is not None:
            check_route_judge("eagle", judge, dynamic_tree=isinstance(tree, DynamicTree), depth=depth)
            judge.check_models(target_hidden=target.hidden_size)
        self.target, self.drafter, self.tree, self.judge = target, drafter, tree, judge
        self.max_draft_len, self.max_path_len = max_draft_len, num_eagle_layers + 1
        self.requests: dict[int, RequestState] = {}

    def greedy_child(self, batch: int) -> torch.Tensor:
        """[B, N + 1] the static tree's rank-0 child of each node (a build-time constant of the engine)."""
        child = np.full(self.max_draft_len + 1, -1, np.int32)
        child[: self.tree.num_nodes + 1] = self.tree.greedy_child
        return torch.from_numpy(np.tile(child, (batch, 1)))

    def release(self, request_id: int) -> None:
        """The runtime frees a finished request's cache."""
        self.requests.pop(request_id, None)

    @torch.inference_mode()
    def step(self, step: EagleStep) -> EagleStepOutputs:
        x = step.tensors
        types, draft_lens = x[EagleInput.HOST_REQUEST_TYPES.value], x[EagleInput.DRAFT_LENS.value]
        draft_tokens, paths = x[EagleInput.DRAFT_TOKENS.value], x[EagleInput.DRAFT_PATHS.value]
        self._check_tree_inputs(step)
        logits, hidden, forwards, start = [], [], [], 0
        for b, rid in enumerate(step.request_ids):
            n = int(draft_lens[b])
            if types[b] == CONTEXT_REQUEST:
                length = int(x[EagleInput.HOST_CONTEXT_LENGTHS.value][b])
                state = self.requests[rid] = RequestState(self.target, self.drafter,
                                                          x[EagleInput.INPUT_IDS.value][start:start + length].tolist())
                out, P, keep = tree_forward(state.target_session, state.tokens, DraftTree.chain(0), np.zeros(0))
                rows = out.logits[-1:], out.hidden[-1:]
            else:
                length = n + 1
                ids = x[EagleInput.INPUT_IDS.value][start:start + length]
                state = self.requests[rid]
                if state.tokens[-1] != ids[0]:
                    raise ValueError(f"request {rid}: the step's root token {ids[0]} is not its last accepted token "
                                     f"{state.tokens[-1]}")
                out, P, keep = tree_forward(state.target_session, state.tokens, tree_from_paths(paths[b], n), ids[1:])
                rows = out.logits[P - 1:], out.hidden[P - 1:]
            start += length
            logits.append(rows[0])
            hidden.append(rows[1])
            forwards.append((out, P, keep))
        lm_logits, lm_input = torch.cat(logits), torch.cat(hidden)  # [L, V], [L, Ht]
        if self.judge is not None:
            w, c = self.judge.folded()
            lm_logits = rewrite_tree_logits(
                lm_logits, lm_input, torch.from_numpy(draft_tokens), torch.from_numpy(draft_lens),
                torch.from_numpy(paths), torch.from_numpy(x[EagleInput.POSTERIOR_THRESHOLD.value]),
                torch.from_numpy(w.astype(np.float32)), c, self.judge.setup,
                self.greedy_child(len(draft_lens)) if self.judge.lookahead else None, self.judge.min_run)
        ids = tree_step.target_ids(lm_logits.argmax(-1).numpy(), draft_lens, self.max_draft_len + 1)
        accepted = tree_step.stock_accept(ids, draft_tokens, paths)
        return EagleStepOutputs({EagleOutput.ACCEPTED_TOKENS.value: accepted.accepted_tokens,
                                 EagleOutput.NUM_ACCEPTED_TOKENS.value: accepted.accepted_lens,
                                 EagleOutput.ACCEPTED_PATHS.value: accepted.accepted_paths,
                                 **self._rewind_and_draft(step, accepted, forwards)})

    def _check_tree_inputs(self, step: EagleStep) -> None:
        """The generation requests' packed mask, position offsets and lengths must be those of their paths."""
        x = step.tensors
        gen = x[EagleInput.HOST_REQUEST_TYPES.value] != CONTEXT_REQUEST
        if not gen.any():
            return
        want = spec_decoding_inputs(x[EagleInput.DRAFT_PATHS.value][gen], x[EagleInput.DRAFT_LENS.value][gen])
        for name, expected in zip((EagleInput.SPEC_DECODING_GENERATION_LENGTHS, EagleInput.SPEC_DECODING_POSITION_OFFSETS,
                                   EagleInput.SPEC_DECODING_PACKED_MASK), want):
            if not np.array_equal(x[name.value], expected):
                raise ValueError(f"{name.value} does not describe the draft_paths of the generation requests")

    def _rewind_and_draft(self, step: EagleStep, accepted: tree_step.StockAcceptance, forwards) -> dict:
        B, N = len(step.request_ids), self.max_draft_len
        next_tokens = np.full((B, N), -1, np.int32)
        next_lens = np.zeros(B, np.int32)
        next_paths = np.full((B, N + 1, self.max_path_len), -1, np.int32)
        paths = step.tensors[EagleInput.DRAFT_PATHS.value]
        for b, rid in enumerate(step.request_ids):
            state, (out, P, keep) = self.requests[rid], forwards[b]
            length = int(accepted.accepted_lens[b])
            nodes = [int(n) for n in paths[b, accepted.accepted_paths[b], 1:length]]  # the accepted draft nodes
            state.target_session.retain(keep, [keep + n - 1 for n in nodes])
            consumed = torch.cat([out.hidden[:P], out.hidden[[P - 1 + n for n in nodes]]]) if nodes else out.hidden[:P]
            state.tokens += [int(t) for t in accepted.accepted_tokens[b, :length]]
            state.draft_session.commit(state.tokens, None, nodes, consumed)
            proposal = state.draft_session.propose(state.tokens, self.tree)
            n = proposal.tree.num_nodes
            next_tokens[b, :n], next_lens[b] = proposal.node_tokens, n
            next_paths[b] = pad_paths(proposal.tree, N, self.max_path_len)
        return {EagleOutput.NEXT_DRAFT_TOKENS.value: next_tokens, EagleOutput.NEXT_DRAFT_LENS.value: next_lens,
                EagleOutput.NEXT_DRAFT_PATHS.value: next_paths}

"""AutoJudge in TensorRT-LLM's PyTorch backend: judge-gated draft acceptance inside ``TorchSampler``.

Written against ``tensorrt_llm/_torch/pyexecutor/sampler.py`` of the 1.2 line: the module constant
``BEAM``, the classmethod ``TorchSampler._handle_stop_criteria(request, new_token, *, max_seq_len)``,
and ``TorchSampler.process_draft_tokens(request, new_tokens_tensor, new_tokens_list, finish_reasons,
resource_manager=None)`` dispatching to ``_process_draft_tokens_greedy`` / ``_tree`` /
``_rejection_sampling``. The later beam-search sampler spells the constant ``DEFAULT_BEAM_IDX`` and
adds ``beam_idx=`` to ``_handle_stop_criteria``; both are taken. docs/deploy.md names the file
versions read. Not run here: no machine of this project has TensorRT-LLM. There is no acceptance
hook upstream, so :func:`enable_autojudge` wraps four things in the current process:

1. a forward pre-hook on every ``LMHead`` (``torch.nn.modules.module.register_module_forward_pre_hook``)
   keeps the LM head's input rows: the target's final-norm hidden states, one row per logits row
   (with the logits they give every judge block read from the target: DT, DT1, DT2, LS);
2. the drafter's padding (:data:`DRAFT_PADDING`): it extends each request's ``py_draft_tokens``
   with token 0 up to the engine's draft length, and the target runs the padded tokens too. The wrap
   first records the drafter's own count, so that padding is never judged (exact match takes a
   padded 0 only where the target itself predicts 0; the judge could take it anywhere);
3. ``TorchSampler.sample_async``: after sampling, the greedy generation requests with draft tokens
   are accepted in one call (:func:`~trtllm_autojudge.trt.pytorch.backend.accept_requests`:
   ``torch.ops.autojudge.accept`` on the step's logits and hidden rows); each request keeps its
   result until ``update_requests``. Chains are the drafter's tokens; trees are the static trees
   of two-model EAGLE3 (``EagleDecodingConfig(eagle_choices=..., eagle3_one_model=False)``,
   experimental in 1.2), whose paths come from the sampler's ``get_spec_tree_manager`` as in
   ``_process_draft_tokens_tree``: ``get_eagle_paths(seq_slot)`` ``[N+1, D+1]``, one row per node;
4. ``TorchSampler.process_draft_tokens``: for a request with a result it writes each accepted draft
   token into ``new_tokens`` (as the rejection-sampling branch does), appends the tokens and
   returns the accepted count (``update_requests`` stores it in ``py_num_accepted_draft_tokens``
   and derives ``py_rewind_len``). For a tree it also sets ``py_num_accepted_draft_tokens_indices``
   (the accepted nodes' draft-token indices), as ``_process_draft_tokens_tree`` does: the KV cache
   manager moves those nodes' cache behind the root, and the EAGLE3 drafter reads their hidden
   states. Other requests go to the original method.

Use (one process, TP 1; the hooks do not reach TensorRT-LLM's MPI worker processes)::

    os.environ["TLLM_WORKER_USE_SINGLE_PROCESS"] = "1"   # run the executor in this process
    stats = enable_autojudge("judge.safetensors", threshold=0.3)
    llm = LLM(model=TARGET, disable_overlap_scheduler=True, cuda_graph_config=None,
              speculative_config=DraftTargetDecodingConfig(max_draft_len=8, speculative_model_dir=DRAFT))

``speculative_model_dir`` is the spelling every 1.x release accepts (later releases renamed the
field ``speculative_model`` and keep the old name as an alias). CUDA graphs must be off (a hook does
not run when a graph replays) and so must the overlap scheduler (it launches the next forward
before ``update_requests``).
"""
from __future__ import annotations

import importlib
import inspect
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from ...judge.head import JudgeHead
from ...spec.acceptance import PAD
from .backend import (JudgeScorer, accept_requests, batch_greedy_child, batch_paths, generation_row_offsets,
                      node_row_index, step_tokens)


@dataclass
class AutoJudgeStats:
    """Per-request metrics, keyed by the request's id: cycles, accepted and judged draft tokens."""

    cycles: dict = field(default_factory=dict)
    accepted: dict = field(default_factory=dict)
    judged: dict = field(default_factory=dict)

    def add(self, request_id, accepted: int, judged: int) -> None:
        self.cycles[request_id] = self.cycles.get(request_id, 0) + 1
        self.accepted[request_id] = self.accepted.get(request_id, 0) + accepted
        self.judged[request_id] = self.judged.get(request_id, 0) + judged


class _LMHeadRows:
    """Input rows of the most recent ``LMHead`` call per hidden width."""

    def __init__(self, lm_head_cls):
        self.lm_head_cls, self.last = lm_head_cls, {}

    def __call__(self, module, args):
        if isinstance(module, self.lm_head_cls) and args and isinstance(args[0], torch.Tensor):
            self.last[int(args[0].shape[-1])] = args[0].detach()


_installed: dict = {}

# Where the drafter pads py_draft_tokens with token 0 (module, class, method): the Drafter base
# class, which the executor calls right after prepare_draft_tokens, or, in the earlier sources,
# ModelDrafter at the end of prepare_draft_tokens. The sources read: docs/deploy.md.
DRAFT_PADDING = (("tensorrt_llm._torch.speculative.drafter", "Drafter", "pad_draft_tokens_for_cuda_graph"),
                 ("tensorrt_llm._torch.speculative.model_drafter", "ModelDrafter", "_pad_to_max_draft_tokens"))


def _draft_padder() -> tuple[type, str]:
    """The drafter class and method that pad the drafts in the installed TensorRT-LLM."""
    for module, cls_name, method in DRAFT_PADDING:
        try:
            cls = getattr(importlib.import_module(module), cls_name, None)
        except ModuleNotFoundError:
            continue
        if hasattr(cls, method):
            return cls, method
    raise RuntimeError(f"found none of the drafter paddings {[f'{c}.{m}' for _, c, m in DRAFT_PADDING]} in this "
                       f"tensorrt_llm: without the drafter's count the judge could accept padded draft tokens; "
                       f"AutoJudge supports the 1.2 line's PyTorch backend")


def static_tree_paths(tree, request, num_draft: int) -> np.ndarray:
    """``[N+1, D+1]``: the request's paths from TensorRT-LLM's ``SpecTreeManager`` (row n: root to
    node n, -1 padded), refused where AutoJudge would judge nodes the target did not run."""
    if tree.use_dynamic_tree:
        raise RuntimeError("AutoJudge judges static draft trees only (EagleDecodingConfig(eagle_choices=...)); this "
                           "run uses a dynamic tree (use_dynamic_tree=True), which the 1.2 line does not verify")
    paths = tree.get_eagle_paths(request.py_seq_slot).cpu().numpy()
    if paths.max() > num_draft:
        raise RuntimeError(f"request {getattr(request, 'py_request_id', '?')} carries {num_draft} draft tokens, but "
                           f"the static tree has {int(paths.max())} nodes, so the target ran no rows for the rest: "
                           f"AutoJudge expects the 1.2-line drafter, which pads every draft to the tree's size")
    return paths


def static_tree_greedy_child(tree) -> np.ndarray:
    """``[N+1]``: the rank-0 child of each node of TensorRT-LLM's static tree (-1: none), the node of
    ``choice + [0]``; node i + 1 is ``eagle_choices[i]``, as ``SpecTreeManager`` numbers them."""
    node = {(): 0, **{tuple(c): i + 1 for i, c in enumerate(tree.eagle_choices)}}
    child = np.full(len(node), PAD, np.int64)
    for choice, n in node.items():
        if choice and choice[-1] == 0:
            child[node[choice[:-1]]] = n
    return child


def enable_autojudge(judge: str | Path | JudgeHead, threshold: float | None = None, use_op: bool = True
                     ) -> AutoJudgeStats:
    """Install the judge into ``TorchSampler`` for this process; returns the live metrics.

    ``use_op=False`` accepts with the Python reference instead of ``torch.ops.autojudge.accept``.
    """
    try:
        from tensorrt_llm._torch.modules.embedding import LMHead
        from tensorrt_llm._torch.pyexecutor import sampler as sampler_mod
        from tensorrt_llm._torch.pyexecutor.sampler import TorchSampler
    except ImportError as e:
        raise ImportError("tensorrt_llm (PyTorch backend, 1.2 line) is not importable: this integration runs on a "
                          "GPU host with tensorrt-llm installed") from e
    if _installed:
        raise RuntimeError("AutoJudge is already enabled in this process: call disable_autojudge() first")
    head = judge if isinstance(judge, JudgeHead) else JudgeHead.load(judge)
    scorer, stats = JudgeScorer(head, threshold), AutoJudgeStats()
    draft_len = sampler_mod.get_draft_token_length
    beam = sampler_mod.BEAM if hasattr(sampler_mod, "BEAM") else sampler_mod.DEFAULT_BEAM_IDX
    takes_beam = "beam_idx" in inspect.signature(TorchSampler._handle_stop_criteria).parameters
    beam_kw = {"beam_idx": beam} if takes_beam else {}
    padder, pad_method = _draft_padder()
    rows = _LMHeadRows(LMHead)
    handle = torch.nn.modules.module.register_module_forward_pre_hook(rows)
    orig_sample, orig_process = TorchSampler.sample_async, TorchSampler.process_draft_tokens
    orig_pad = getattr(padder, pad_method)

    def greedy(request) -> bool:
        return sampler_mod._request_strategy(request, vocab_size=2**31) == sampler_mod.GREEDY

    def pad(self, scheduled_requests, *args, **kwargs):
        for r in scheduled_requests.generation_requests:
            r.py_autojudge_draft_len = draft_len(r)  # the drafter's own drafts, before its padding
        return orig_pad(self, scheduled_requests, *args, **kwargs)

    def drafted(request) -> int:
        """This step's drafts without the padding (all of them when nothing was recorded)."""
        real, request.py_autojudge_draft_len = getattr(request, "py_autojudge_draft_len", None), None
        return draft_len(request) if real is None else min(real, draft_len(request))

    def sample_async(self, scheduled_requests, model_outputs, num_context_logits_prefix_sum, *args, **kwargs):
        state = orig_sample(self, scheduled_requests, model_outputs, num_context_logits_prefix_sum, *args, **kwargs)
        n_ctx = len(scheduled_requests.context_requests)
        ctx_rows = num_context_logits_prefix_sum[n_ctx] if len(num_context_logits_prefix_sum) == n_ctx + 1 else n_ctx
        gen = list(scheduled_requests.generation_requests)
        # rows: 1 + every draft token the engine ran, padding included; judged: the drafter's own
        row_lens = [draft_len(r) for r in gen]
        offsets = generation_row_offsets(ctx_rows, row_lens)
        judged_lens = [drafted(r) for r in gen]
        chosen = [(r, o, n, k) for r, o, n, k in zip(gen, offsets, row_lens, judged_lens) if n > 0 and greedy(r)]
        if not chosen:
            return state
        logits = model_outputs["logits"]
        hidden = rows.last.get(scorer.target_hidden)
        if hidden is None or hidden.shape[0] != logits.shape[0]:
            raise RuntimeError(f"AutoJudge found no LM-head input of width {scorer.target_hidden} with "
                               f"{logits.shape[0]} rows for this step: run with cuda_graph_config=None and a target "
                               f"whose hidden size matches the judge")
        requests = [r for r, _, _, _ in chosen]
        lens = [k for _, _, _, k in chosen]  # nodes 1..k may be accepted: padded nodes never are
        index, N = node_row_index([o for _, o, _, _ in chosen], [n for _, _, n, _ in chosen])
        draft = np.zeros((len(requests), N), np.int64)  # [B, N]: every draft token the engine ran
        for b, (r, _, n, _) in enumerate(chosen):
            draft[b, :n] = r.py_draft_tokens[:n]
        tree = self.get_spec_tree_manager(kwargs.get("resource_manager", args[0] if args else None))
        trees = [None if tree is None else static_tree_paths(tree, r, draft_len(r)) for r in requests]
        paths = batch_paths(lens, trees)
        greedy_child = None  # [B, N+1]: read by lookahead judges only
        if scorer.head.lookahead:
            children = None if tree is None else static_tree_greedy_child(tree)  # [N+1]
            greedy_child = batch_greedy_child(lens, [children] * len(requests), N)
        acc = accept_requests(scorer, logits, hidden, index, draft, np.asarray(lens), paths,
                              np.full(len(requests), scorer.threshold, np.float32), use_op=use_op,
                              greedy_child=greedy_child)
        for b, r in enumerate(requests):
            r.py_autojudge_step = step_tokens(acc, b, paths, tree=tree is not None)
        return state

    def process_draft_tokens(self, request, *args, **kwargs):
        step = getattr(request, "py_autojudge_step", None)
        if step is None:
            return orig_process(self, request, *args, **kwargs)
        request.py_autojudge_step = None
        new_tokens_tensor = kwargs["new_tokens_tensor"] if "new_tokens_tensor" in kwargs else args[0]
        new_tokens_list = kwargs["new_tokens_list"] if "new_tokens_list" in kwargs else args[1]
        slot = request.py_seq_slot
        added = judged = 0
        for token, row in zip(step.tokens, step.rows):
            judged += int(added < step.accepted and new_tokens_list[row][slot][beam] != token)
            new_tokens_list[row][slot][beam] = token
            new_tokens_tensor[row, slot, beam] = token
            request.add_new_token(token, beam)
            added += 1
            if self._handle_stop_criteria(request, token, max_seq_len=self.max_seq_len, **beam_kw):
                break
        if step.tree:
            request.py_num_accepted_draft_tokens_indices = step.kv_indices(added)
        stats.add(getattr(request, "py_request_id", id(request)), added - 1, judged)
        return added - 1  # accepted draft tokens, as the original returns

    TorchSampler.sample_async, TorchSampler.process_draft_tokens = sample_async, process_draft_tokens
    setattr(padder, pad_method, pad)
    _installed.update(cls=TorchSampler, sample=orig_sample, process=orig_process, handle=handle,
                      padder=padder, pad_method=pad_method, pad=orig_pad)
    return stats


def disable_autojudge() -> None:
    """Restore ``TorchSampler`` and remove the LM-head hook."""
    if not _installed:
        return
    cls = _installed["cls"]
    cls.sample_async, cls.process_draft_tokens = _installed["sample"], _installed["process"]
    setattr(_installed["padder"], _installed["pad_method"], _installed["pad"])
    _installed["handle"].remove()
    _installed.clear()

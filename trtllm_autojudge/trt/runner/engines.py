"""Run the TensorRT-LLM 1.2 engines (``trtllm-autojudge run-engines``), on any route; the target
engine's config says which (docs/deploy.md).

``mpirun -n N python -m trtllm_autojudge.trt.runner.engines --draft_engine_dir ... \\
    --target_engine_dir ... --tokenizer_dir ... --prompt "..." [--threshold 0.3]``

EAGLE route (a target built with ``build-engines --route eagle``): the executor's own EAGLE decoding
with the engine's tree and per-request thresholds (:mod:`.eagle_executor`); no draft engine.

Stock route (a target built with ``build-engines --route stock``): the executor's draft-target
flow, unchanged (:func:`trtllm_autojudge.trt.runner.stock_loop.stock_generate`): rank 0 drafts on
:class:`ExecutorDraftEngine` and sends every verification as a fresh target request with external
draft tokens to :class:`ExecutorStockTarget`; the executor runs the N tensor-parallel ranks (leader
mode: the other ranks only construct their executors and wait, as ``ModelRunnerCpp`` has them do).
The threshold is the engine's (a build field); ``--threshold`` and per-request thresholds are
refused. Context route, below:

- Drafting: :class:`EngineDrafter` runs the draft engine through the executor bindings with the
  calls ``ModelRunnerCpp`` makes (:class:`ExecutorDraftEngine`): D greedy tokens per request, the
  draft's generation logits for the top-W siblings of a chain tree and, for a judge with the blocks
  DD or DD1, the draft's hidden states as an additional model output (``ModelRunnerCpp.generate`` cannot request
  one). The drafting itself is :class:`trtllm_autojudge.trt.runner.chain_drafter.ChainTreeDrafter`, tested
  on CPU. Rank 0 drafts and broadcasts (in leader mode only rank 0 enqueues).
- Verifying: :class:`EngineTargetVerifier` runs the AutoJudge target engine with
  ``tensorrt_llm.runtime.Session`` on every rank (the Python runtime's classes refuse engine inputs
  they do not know), with the tree's greedy children for a lookahead judge; the plugin returns
  accepted tokens, lengths, best path and judged counts.
- The loop, per-request thresholds and per-request metrics: :func:`trtllm_autojudge.trt.runner.loop.engine_generate`.

Nothing here imports TensorRT-LLM before a class is built; none of it has run on this project's
machines (no TensorRT). The pure parts it relies on are tested on CPU.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

from ...decoding.tree import DraftTree
from ...judge.head import JudgeHead
from ...spec.acceptance import Acceptance
from ..engine.draft_spec import RESULT_PREFIX, engine_hidden_output
from ..engine.eagle_spec import EagleBlock
from ..engine.io_spec import ENGINE_OUTPUTS, EngineBlock
from ..engine.stock_spec import STOCK_BLOCK_KEY, StockBlock
from ..plugin.library import load_plugin_library
from .chain_drafter import ChainTreeDrafter, DraftOutput
from .eagle_executor import ExecutorEagleTarget, eagle_rows
from .executor_calls import _require_tensorrt_llm, check_gpu_weights_percent, leader_executor, route_target, run_requests
from .loop import DraftProposal, check_thresholds, engine_generate
from .packing import PackedCycle, chain_tree, engine_feed
from .stock_loop import stock_generate
from .tp import check_rank_agreement


class ExecutorDraftEngine:
    """The draft engine through TensorRT-LLM's executor bindings (what ``ModelRunnerCpp`` wraps), in
    leader mode: only rank 0 enqueues. A draft engine built for a judge with the blocks DD or DD1 (its
    config has the ``autojudge_draft`` block) also returns its hidden-state rows as an additional
    model output."""

    def __init__(self, engine_dir: str | Path, *, end_id: int, pad_id: int, kv_cache_fraction: float | None = None):
        _require_tensorrt_llm()
        from tensorrt_llm.bindings import executor as trtllm

        self.trtllm, self.end_id, self.pad_id = trtllm, end_id, pad_id
        config = json.loads((Path(engine_dir) / "config.json").read_text())
        self.vocab_size = int(config["pretrained_config"]["vocab_size"])
        self.hidden_output = engine_hidden_output(config)
        self.returns_hidden = self.hidden_output is not None
        # gather_context=False: one row per sequence and step (the last token's), not every context token
        self.outputs = ([trtllm.AdditionalModelOutput(self.hidden_output, gather_context=False)]
                        if self.returns_hidden else [])
        # the chain tree's leaf siblings come from the draft's generation logits (draft width > 1)
        self.executor = leader_executor(trtllm, engine_dir, config, kv_cache_fraction, self.outputs,
                                        gather_generation_logits=True)

    def generate(self, prompts, max_new_tokens: int, *, logits: bool, hidden: bool) -> list[DraftOutput]:
        trtllm = self.trtllm
        output_config = trtllm.OutputConfig(return_generation_logits=logits,
                                            additional_model_outputs=self.outputs if hidden else None)
        requests = [trtllm.Request(input_token_ids=[int(t) for t in p], max_tokens=max_new_tokens, end_id=self.end_id,
                                   pad_id=self.pad_id, sampling_config=trtllm.SamplingConfig(beam_width=1, top_k=1),
                                   output_config=output_config) for p in prompts]
        results = dict(zip(range(len(prompts)), run_requests(self.executor, requests, "draft")))
        outs = []
        for request_id, p in enumerate(prompts):
            r = results[request_id]
            extra = {o.name: o.output for o in r.additional_outputs}
            outs.append(DraftOutput(
                tokens=list(r.output_token_ids[0][len(p):]),  # the result holds prompt + generated tokens
                logits=r.generation_logits[0].float().cpu().numpy() if logits else None,  # [max_tokens, V_padded]
                hidden=extra[RESULT_PREFIX + self.hidden_output][0].float().cpu().numpy() if hidden else None,
            ))  # hidden: [max_tokens, Hd]
        return outs


class EngineDrafter:
    """Chain-tree drafts on rank 0 (:class:`ExecutorDraftEngine`), broadcast to every MPI rank."""

    def __init__(self, engine_dir: str | Path, *, rank: int, end_id: int, pad_id: int):
        self.rank = rank
        self.drafter = ChainTreeDrafter(ExecutorDraftEngine(engine_dir, end_id=end_id, pad_id=pad_id))

    def propose(self, prefixes: list[list[int]], tree: DraftTree, need_hidden: bool) -> DraftProposal:
        from tensorrt_llm._utils import mpi_broadcast

        proposal = self.drafter.propose(prefixes, tree, need_hidden) if self.rank == 0 else None
        return mpi_broadcast(proposal, 0)


class ExecutorStockTarget:
    """The stock route's target (:class:`trtllm_autojudge.trt.runner.stock_loop.StockTarget`) through
    the executor: per request a fresh request ``prefix`` with ``ExternalDraftTokensConfig(drafts)``
    and ``max_tokens = K + 1``, greedy; its prefix blocks are reused (the runtime requires block
    reuse for a draft-target target). The engine's plugin has rewritten the logits, so the runtime's
    exact-match acceptance returns the judge-approved prefix and one target token."""

    def __init__(self, engine_dir: str | Path, *, end_id: int, pad_id: int, kv_cache_fraction: float | None = None,
                 gpu_weights_percent: float = 1.0):
        _require_tensorrt_llm()
        from tensorrt_llm.bindings import executor as trtllm

        config, self.block = route_target(engine_dir, StockBlock, STOCK_BLOCK_KEY, "stock")
        self.trtllm, self.end_id, self.pad_id = trtllm, end_id, pad_id
        self.executor = leader_executor(trtllm, engine_dir, config, kv_cache_fraction, [],
                                        gpu_weights_percent=gpu_weights_percent)

    def verify(self, prefixes: list[list[int]], drafts: list[list[int]]) -> list[list[int]]:
        trtllm = self.trtllm
        requests = [trtllm.Request(
            input_token_ids=[int(t) for t in p], max_tokens=len(d) + 1, end_id=self.end_id, pad_id=self.pad_id,
            sampling_config=trtllm.SamplingConfig(beam_width=1, top_k=1),
            output_config=trtllm.OutputConfig(exclude_input_from_output=True),
            external_draft_tokens_config=trtllm.ExternalDraftTokensConfig([int(t) for t in d]) if d else None)
            for p, d in zip(prefixes, drafts)]
        return [list(r.output_token_ids[0]) for r in run_requests(self.executor, requests, "target")]

    def shutdown(self) -> None:
        self.executor.shutdown()


class EngineTargetVerifier:
    """The AutoJudge target engine through ``tensorrt_llm.runtime.Session`` (every MPI rank)."""

    def __init__(self, engine_dir: str | Path, *, rank: int, check_ranks: bool = False, gpu_weights_percent: float = 1.0):
        _require_tensorrt_llm()
        import tensorrt as trt
        import torch
        from tensorrt_llm import Mapping
        from tensorrt_llm._utils import mpi_world_size
        from tensorrt_llm.runtime.session import Session

        engine_dir = Path(engine_dir)
        config = json.loads((engine_dir / "config.json").read_text())
        self.block = EngineBlock.from_engine_config(config)
        head = JudgeHead.load(self.block.judge_file)
        self.needs_draft_hidden = head.needs_draft_hidden
        self.needs_greedy_child = head.lookahead > 0  # the engine has the input autojudge_greedy_child
        self.default_threshold = head.threshold
        pretrained, build = config["pretrained_config"], config["build_config"]
        m = pretrained["mapping"]
        world, tp, gpus_per_node = int(m["world_size"]), int(m["tp_size"]), int(m.get("gpus_per_node", 8))
        if mpi_world_size() != world:
            raise RuntimeError(f"the target engine was built for {world} ranks; launch with `mpirun -n {world}`")
        self.num_layers = int(pretrained["num_hidden_layers"])
        self.max_input_len, self.max_seq_len = int(build["max_input_len"]), int(build["max_seq_len"])
        torch.cuda.set_device(rank % gpus_per_node)
        load_plugin_library(self.block.plugin_library)  # before deserializing: the engine holds the plugin
        self.session = Session.from_serialized_engine((engine_dir / f"rank{rank}.engine").read_bytes())
        # A weight-streaming engine gets its execution context only here (Session._init skips it when
        # engine.streamable_weights_size > 0), with its GPU budget; other engines take 1 and keep theirs.
        self.session._set_weight_streaming(check_gpu_weights_percent(gpu_weights_percent, config, engine_dir))
        engine = self.session.engine
        names = [engine.get_tensor_name(i) for i in range(engine.num_io_tensors)]
        self.inputs = {n for n in names if engine.get_tensor_mode(n) == trt.TensorIOMode.INPUT}
        self.workspace = None
        if "all_reduce_workspace" in self.inputs:
            from tensorrt_llm.plugin.plugin import CustomAllReduceHelper

            mapping = Mapping(world_size=world, rank=rank, tp_size=tp, pp_size=1, gpus_per_node=gpus_per_node)
            self._ipc_buffers, self.workspace = CustomAllReduceHelper.allocate_workspace(
                mapping, CustomAllReduceHelper.max_workspace_size_auto(tp))
        self.stream = torch.cuda.Stream()
        self.comm = None
        if check_ranks:
            from mpi4py import MPI

            self.comm = MPI.COMM_WORLD

    def verify(self, cycle: PackedCycle) -> Acceptance:
        import torch
        from tensorrt_llm._utils import torch_dtype_to_trt, trt_dtype_to_torch
        from tensorrt_llm.runtime.session import TensorInfo

        engine = self.session.engine
        feed = engine_feed(cycle, self.num_layers, self.max_input_len, self.max_seq_len)
        missing = self.inputs - set(feed) - {"all_reduce_workspace"}
        if missing:
            raise RuntimeError(f"the target engine has inputs this runner does not fill: {sorted(missing)}; rebuild it "
                               f"with `trtllm-autojudge build-engines` (context-only, packed rows)")
        tensors = {}
        for name, (array, on_host) in feed.items():
            if name not in self.inputs:
                continue  # e.g. last_token_ids when the engine gathers context logits
            t = torch.from_numpy(np.ascontiguousarray(array)).to(trt_dtype_to_torch(engine.get_tensor_dtype(name)))
            tensors[name] = t if on_host else t.cuda()
        if self.workspace is not None:
            tensors["all_reduce_workspace"] = self.workspace
        infos = [TensorInfo(n, torch_dtype_to_trt(t.dtype), tuple(t.shape)) for n, t in tensors.items()]
        outputs = {o.name: torch.empty(tuple(o.shape), dtype=trt_dtype_to_torch(o.dtype), device="cuda")
                   for o in self.session.infer_shapes(infos)}
        if not self.session.run(tensors, outputs, self.stream.cuda_stream):
            raise RuntimeError("executing the AutoJudge target engine failed (TensorRT's log says why)")
        self.stream.synchronize()
        got = {name: outputs[name].cpu().numpy() for name in ENGINE_OUTPUTS}
        acc = Acceptance(accepted_len=got["accepted_lens"], best_path=got["best_path"],
                         accepted_tokens=got["accepted_tokens"], judged_count=got["judged_count"])
        if self.comm is not None:
            check_rank_agreement(self.comm, acc)
        return acc


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="python -m trtllm_autojudge.trt.runner.engines",
                                 description="Speculative decoding with the AutoJudge TensorRT-LLM 1.2 engines")
    ap.add_argument("--draft_engine_dir", help="the draft engine (context and stock routes; the EAGLE route drafts "
                    "inside its target)")
    ap.add_argument("--target_engine_dir", required=True)
    ap.add_argument("--tokenizer_dir", required=True, help="Hugging Face tokenizer of the pair")
    ap.add_argument("--prompt", action="append", default=[], help="a prompt (repeatable)")
    ap.add_argument("--prompts_file", help="JSONL with 'prompt' and optional per-request 'threshold'")
    ap.add_argument("--threshold", type=float, help="threshold for requests that set none (default: the judge's)")
    ap.add_argument("--depth", type=int, help="D (default: the engine's longest path)")
    ap.add_argument("--width", type=int, default=1, help="W: candidates per depth, a chain tree")
    ap.add_argument("--max_new_tokens", type=int, default=256)
    ap.add_argument("--check_ranks", action="store_true", help="compare every cycle's decision across TP ranks "
                    "(context route)")
    ap.add_argument("--kv_cache_fraction", type=float, default=0.4,
                    help="stock and EAGLE routes: GPU memory share of each executor's KV cache")
    ap.add_argument("--gpu_weights_percent", type=float, default=1.0,
                    help="share of the target engine's streamable weights kept on the GPU, the rest streamed from "
                         "the host each forward (an engine built with build-engines --weight_streaming; 0 to 1, "
                         "default 1)")
    ap.add_argument("--output", help="JSONL of per-request results (rank 0)")
    args = ap.parse_args(argv)
    if not 0.0 <= args.gpu_weights_percent <= 1.0:
        ap.error(f"--gpu_weights_percent is the share of the target's streamable weights kept on the GPU: give a "
                 f"number in [0, 1], got {args.gpu_weights_percent:g}")
    return args


def read_requests(args: argparse.Namespace) -> list[dict]:
    """Requests from --prompt and --prompts_file (JSONL rows with "prompt" text or "prompt_ids",
    optional "threshold"; other keys, e.g. a gold "answer", are copied to the result rows)."""
    rows = [{"prompt": p} for p in args.prompt]
    if args.prompts_file:
        rows += [json.loads(line) for line in Path(args.prompts_file).read_text().splitlines() if line.strip()]
    if not rows:
        raise ValueError("give at least one --prompt or a --prompts_file")
    for i, row in enumerate(rows):
        if ("prompt" in row) == ("prompt_ids" in row):
            raise ValueError(f"request {i}: give exactly one of 'prompt' (text) and 'prompt_ids' (token ids)")
    return rows


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    requests = read_requests(args)
    try:
        _require_tensorrt_llm()
    except ImportError as e:
        print(e, file=sys.stderr)
        return 2
    from tensorrt_llm._utils import mpi_rank
    from transformers import AutoTokenizer

    rank = mpi_rank()
    tokenizer = AutoTokenizer.from_pretrained(args.tokenizer_dir)
    prompts = [r["prompt_ids"] if "prompt_ids" in r else tokenizer.encode(r["prompt"]) for r in requests]
    target_config = json.loads((Path(args.target_engine_dir) / "config.json").read_text())
    if EagleBlock.from_engine_config(target_config) is not None:
        return run_eagle(args, requests, prompts, tokenizer, rank)
    if args.draft_engine_dir is None:
        raise ValueError("--draft_engine_dir: the context and stock routes draft on a draft engine")
    if StockBlock.from_engine_config(target_config) is not None:
        return run_stock(args, requests, prompts, tokenizer, rank)
    verifier = EngineTargetVerifier(args.target_engine_dir, rank=rank, check_ranks=args.check_ranks,
                                    gpu_weights_percent=args.gpu_weights_percent)
    block = verifier.block
    tree = chain_tree(args.depth or block.max_path_len - 1, args.width)
    if tree.num_nodes > block.max_draft_nodes or len(tree.paths) > block.max_paths or tree.max_depth + 1 > block.max_path_len:
        raise ValueError(f"the tree (N={tree.num_nodes}, P={len(tree.paths)}, D={tree.max_depth}) exceeds the engine's "
                         f"limits {block}: rebuild with build_engines.py --depth/--width")
    default = args.threshold if args.threshold is not None else verifier.default_threshold
    thresholds = check_thresholds([r.get("threshold", default) for r in requests], len(prompts))
    eos = tokenizer.eos_token_id
    drafter = EngineDrafter(args.draft_engine_dir, rank=rank, end_id=eos, pad_id=tokenizer.pad_token_id or eos)
    results = []
    for start in range(0, len(prompts), block.max_requests):
        batch = slice(start, start + block.max_requests)
        results += engine_generate(drafter, verifier, prompts[batch], tree=tree, thresholds=thresholds[batch],
                                   max_new_tokens=args.max_new_tokens, stop_ids=[eos])
    if rank == 0:
        write_rows(args, [dict(request, threshold=float(th), text=tokenizer.decode(r.tokens, skip_special_tokens=True),
                               **r.summary()) for request, th, r in zip(requests, thresholds, results)])
    return 0


def write_rows(args: argparse.Namespace, rows: list[dict]) -> None:
    out = open(args.output, "w") if args.output else sys.stdout
    for row in rows:
        out.write(json.dumps(row) + "\n")
    if args.output:
        out.close()


def run_eagle(args: argparse.Namespace, requests: list[dict], prompts: list[list[int]], tokenizer, rank: int) -> int:
    """The EAGLE route: the executor's own EAGLE decoding, per-request thresholds (:mod:`.eagle_executor`)."""
    if args.draft_engine_dir or args.width != 1 or args.depth:
        raise ValueError("the EAGLE route drafts inside its target with the tree it was built with: no "
                         "--draft_engine_dir, --depth or --width (rebuild with build-engines --route eagle to change it)")
    eos = tokenizer.eos_token_id
    target = ExecutorEagleTarget(args.target_engine_dir, end_id=eos,
                                 pad_id=tokenizer.pad_token_id if tokenizer.pad_token_id is not None else eos,
                                 kv_cache_fraction=args.kv_cache_fraction, gpu_weights_percent=args.gpu_weights_percent)
    requested = [r.get("threshold", args.threshold) for r in requests]
    if rank == 0:
        outputs = target.generate(prompts, requested, args.max_new_tokens)
        thresholds = [target.block.threshold if t is None else t for t in requested]
        write_rows(args, eagle_rows(requests, outputs, thresholds, tokenizer))
    target.shutdown()
    return 0


def run_stock(args: argparse.Namespace, requests: list[dict], prompts: list[list[int]], tokenizer, rank: int) -> int:
    """The stock route: the executor's draft-target flow (module docstring)."""
    if args.threshold is not None or any("threshold" in r for r in requests):
        raise ValueError("the stock route's threshold is the target engine's (build-engines --route stock --threshold); "
                         "per-request thresholds need the context route")
    if args.width != 1:
        raise ValueError("the stock route verifies chains: --width 1 (trees need the context route)")
    eos = tokenizer.eos_token_id
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else eos
    target = ExecutorStockTarget(args.target_engine_dir, end_id=eos, pad_id=pad,
                                 kv_cache_fraction=args.kv_cache_fraction, gpu_weights_percent=args.gpu_weights_percent)
    draft = ExecutorDraftEngine(args.draft_engine_dir, end_id=eos, pad_id=pad, kv_cache_fraction=args.kv_cache_fraction)
    depth = args.depth or target.block.max_draft_len
    if depth > target.block.max_draft_len:
        raise ValueError(f"--depth {depth} exceeds the target's --max_draft_len {target.block.max_draft_len}")
    if rank == 0:
        results = []
        max_batch = int(json.loads((Path(args.target_engine_dir) / "config.json").read_text())
                        ["build_config"]["max_batch_size"])
        for start in range(0, len(prompts), max_batch):
            batch = prompts[start:start + max_batch]
            results += stock_generate(ChainTreeDrafter(draft), target, batch, depth=depth,
                                      max_new_tokens=args.max_new_tokens, stop_ids=[eos])
        rows = []
        for request, r in zip(requests, results):
            summary = r.summary()
            del summary["judged_accepts"]  # not observable on the stock route (stock_loop docstring)
            rows.append(dict(request, threshold=target.block.threshold,
                             text=tokenizer.decode(r.tokens, skip_special_tokens=True), **summary))
        write_rows(args, rows)
    draft.executor.shutdown()
    target.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())

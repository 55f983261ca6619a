"""Generate a Triton model repository for the AutoJudge TensorRT-LLM 1.2 engines, on any route
(``trtllm-autojudge make-triton-repo``; ``python build_scripts/make_triton_repo.py`` runs this too).

``--route context`` (default): ``trtllm-autojudge make-triton-repo --output_dir triton_repo
--draft_engine_dir E/draft --target_engine_dir E/target --tokenizer_dir HF_TARGET`` writes
preprocessing, postprocessing, tensorrt_llm_draft (stock tensorrtllm backend), autojudge_target and
autojudge_bls (this package's Python models); see trtllm_autojudge/trt/triton/config.py.

``--route stock``: add ``--backend_models_dir <TensorRT-LLM checkout>`` (or its
``triton_backend/all_models/inflight_batcher_llm``); writes the TensorRT-LLM backend's own
preprocessing, postprocessing, tensorrt_llm (the stock-route target), tensorrt_llm_draft and
tensorrt_llm_bls with the draft-target parameters filled in, no custom Python model; see
trtllm_autojudge/trt/triton/stock.py.

``--route eagle``: with ``--backend_models_dir`` too, and no draft engine; ``--target_engine_dir`` is
an engine of ``build-engines --route eagle`` built with ``--eagle_choices`` and ``--threshold_source
engine`` (read here from its config.json, or ``--engine_config``); writes preprocessing,
postprocessing, tensorrt_llm (``decoding_mode "eagle"``, the engine's ``eagle_choices``) and
tensorrt_llm_bls; see trtllm_autojudge/trt/triton/eagle.py.

``--route cpu``: no engines: ``--target``, ``--draft``, ``--draft-vocab``, ``--task``, ``--judge`` and
``--dtype`` name the pair as ``trtllm-autojudge generate`` does (default: the embedded pair and the
program task's shipped judge); writes the context route's preprocessing, postprocessing and
autojudge_bls (decoupled: streaming) over Python stand-ins of tensorrt_llm_draft and
autojudge_target on the CPU reference runtime, which a stock tritonserver serves on CPU; see
trtllm_autojudge/trt/triton/cpu.py and docs/serving.md (``trtllm-autojudge serve`` writes and serves
one).

``--gpu_weights_percent P`` (the engine routes): the share of a weight-streaming target engine's
weights kept on the GPU (``build-engines --weight_streaming``; docs/deploy.md, "Long windows and
weight streaming"): the target model's ``gpu_weights_percent`` parameter on the stock and EAGLE
routes, the ``autojudge_target`` model's on the context route.

Paths are written as given, made absolute: give the paths the Triton server will see.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from .config import make_repository
from .cpu import make_cpu_repository
from .cpu_args import add_cpu_route_args, cpu_route_from_args
from .eagle import make_eagle_repository
from .stock import make_stock_repository


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="trtllm-autojudge make-triton-repo", description=__doc__.split("\n\n")[0])
    ap.add_argument("--route", choices=["context", "stock", "eagle", "cpu"], default="context",
                    help="docs/deploy.md; cpu: docs/serving.md")
    ap.add_argument("--output_dir", required=True, help="model repository to write (tritonserver --model-repository)")
    ap.add_argument("--draft_engine_dir", help="context and stock routes")
    ap.add_argument("--target_engine_dir", help="context route: built with --tp_size 1 or N (spawned "
                    "ranks); stock route: built with build-engines --route stock; eagle route: with build-engines "
                    "--route eagle")
    ap.add_argument("--tokenizer_dir", help="the engine routes: the pair's HF tokenizer folder")
    ap.add_argument("--max_batch_size", type=int, default=8, help="in-flight batch of the engine models")
    ap.add_argument("--bls_instances", type=int, default=4, help="concurrent requests the BLS model serves")
    ap.add_argument("--kv_cache_fraction", type=float, default=0.4, help="GPU memory share of each engine's KV cache")
    ap.add_argument("--backend_models_dir", help="stock and eagle routes: the TensorRT-LLM checkout of the installed release, or "
                    "its triton_backend/all_models/inflight_batcher_llm (the model templates)")
    ap.add_argument("--engine_config", help="eagle route: the target engine's config.json where it is visible here "
                    "(default: TARGET_ENGINE_DIR/config.json)")
    ap.add_argument("--target_gpus", default="", help="stock and eagle routes: gpu_device_ids of the target (e.g. 0,1 for TP 2)")
    ap.add_argument("--draft_gpus", default="", help="stock route: gpu_device_ids of the draft")
    ap.add_argument("--gpu_weights_percent", type=float, default=1.0,
                    help="the engine routes: share of the target engine's streamable weights kept on the GPU, the rest "
                         "streamed from the host each forward (an engine built with build-engines --weight_streaming; "
                         "0 to 1, default 1)")
    cpu = ap.add_argument_group("cpu route (the pair as `trtllm-autojudge generate` names it)")
    add_cpu_route_args(cpu)
    args = ap.parse_args(argv)
    if not 0.0 <= args.gpu_weights_percent <= 1.0:
        ap.error(f"--gpu_weights_percent is the share of the target's streamable weights kept on the GPU: give a "
                 f"number in [0, 1], got {args.gpu_weights_percent:g}")
    if args.route == "cpu":
        engine_flags = [f for f in ("draft_engine_dir", "target_engine_dir", "tokenizer_dir", "backend_models_dir",
                                    "engine_config", "target_gpus", "draft_gpus") if getattr(args, f)]
        if args.gpu_weights_percent != 1.0:
            engine_flags.append("gpu_weights_percent")
        if engine_flags:
            ap.error(f"--route cpu runs no engines: drop --{', --'.join(engine_flags)}")
        return args
    if not args.target_engine_dir or not args.tokenizer_dir:
        ap.error(f"--route {args.route} needs --target_engine_dir and --tokenizer_dir")
    if args.route != "context" and not args.backend_models_dir:
        ap.error(f"--route {args.route} needs --backend_models_dir: the stock models come from your TensorRT-LLM "
                 f"checkout's triton_backend/all_models/inflight_batcher_llm")
    if args.route == "context" and (args.backend_models_dir or args.target_gpus or args.draft_gpus):
        ap.error("--backend_models_dir / --target_gpus / --draft_gpus belong to --route stock and eagle")
    if (args.route == "eagle") == bool(args.draft_engine_dir):
        ap.error("--route eagle takes no --draft_engine_dir (the EAGLE engine drafts itself)" if args.draft_engine_dir
                 else f"--route {args.route} needs --draft_engine_dir")
    if args.engine_config and args.route != "eagle":
        ap.error("--engine_config belongs to --route eagle")
    if args.draft_gpus and args.route == "eagle":
        ap.error("--draft_gpus belongs to --route stock")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.route == "cpu":
        pair, options = cpu_route_from_args(args)
        try:
            written = make_cpu_repository(args.output_dir, pair, bls_instances=args.bls_instances, **options)
        except ValueError as e:
            raise SystemExit(f"make-triton-repo --route cpu: {e}") from None
        for path in written:
            print(path)
        return 0
    absolute = lambda p: str(Path(p).expanduser().absolute())  # noqa: E731
    common = dict(target_engine_dir=absolute(args.target_engine_dir), tokenizer_dir=absolute(args.tokenizer_dir),
                  max_batch_size=args.max_batch_size, bls_instances=args.bls_instances,
                  kv_cache_fraction=args.kv_cache_fraction, target_gpu_weights_percent=args.gpu_weights_percent)
    if args.route == "eagle":
        written = make_eagle_repository(args.output_dir, absolute(args.backend_models_dir),
                                        engine_config=args.engine_config, target_gpus=args.target_gpus, **common)
    elif args.route == "stock":
        written = make_stock_repository(args.output_dir, absolute(args.backend_models_dir), target_gpus=args.target_gpus,
                                        draft_gpus=args.draft_gpus, draft_engine_dir=absolute(args.draft_engine_dir),
                                        **common)
    else:
        written = make_repository(args.output_dir, draft_engine_dir=absolute(args.draft_engine_dir), **common)
    for path in written:
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""`trtllm-autojudge <verb>`: one verb per pipeline stage.

Each verb lives in its own module with an argparse ``main(argv) -> int``; this file only routes.
Verbs whose module is not part of this checkout yet say so and exit with status 2.
"""
from __future__ import annotations

import importlib
import importlib.util
import sys

# verb: (module, function, one-line help, work item that brings it)
VERBS = {
    "demo": ("trtllm_autojudge.demo", "main", "lossless vs AutoJudge vs top-K on the embedded pair (the README's main job)", "#5"),
    "generate": ("trtllm_autojudge.generate", "main", "answer one question with speculative decoding, printing per-cycle metrics", "#2"),
    "mine": ("trtllm_autojudge.mining.cli", "main", "mine important/unimportant mismatch labels (MPI-sharded, resumable)", "#4"),
    "features": ("trtllm_autojudge.mining.features_cli", "main", "compute judge features (hidden states) for mined labels", "#4"),
    "train": ("trtllm_autojudge.judge.cli_train", "main_train", "train the judge head (C grid, threshold sweep)", "#4"),
    "export": ("trtllm_autojudge.judge.cli_train", "main_export", "export a judge: plugin fields, ONNX, vLLM-style JSON", "#4"),
    "eval": ("trtllm_autojudge.evaluation.cli", "main_eval", "accuracy / accepted-tokens frontier against baselines", "#5"),
    "calibrate": ("trtllm_autojudge.evaluation.calibrate", "main", "set a judge's default threshold by the share of final answers it changes", "#11"),
    "bench": ("trtllm_autojudge.evaluation.cli", "main_bench", "wall-clock: target-only vs lossless vs AutoJudge", "#5"),
    "speed-model": ("trtllm_autojudge.evaluation.speed_model_cli", "main", "speedup against the target forward's cost in draft steps (offloading), from measured tokens per forward", "#62"),
    "build-plugin": ("trtllm_autojudge.ops.plugin_build", "main", "build the CUDA/TensorRT plugin library (needs nvcc)", "#6"),
    "build-engines": ("trtllm_autojudge.trt.build_engines", "main", "build TensorRT-LLM 1.2 engines with the plugin (--route context|stock|eagle)", "#7"),
    "run-engines": ("trtllm_autojudge.trt.runner.engines", "main", "generate with built engines, any route (TensorRT-LLM 1.2, GPU host)", "#7"),
    "serve": ("trtllm_autojudge.serving.cli", "main", "serve AutoJudge from a real Triton Inference Server on this CPU (docs/serving.md)", "#63"),
    "make-triton-repo": ("trtllm_autojudge.trt.triton.make_repo", "main", "write a Triton model repository for built engines or the CPU route (--route context|stock|eagle|cpu)", "#7"),
}


def _usage() -> str:
    rows = "\n".join(f"  {verb:<14} {spec[2]}" for verb, spec in VERBS.items())
    return f"usage: trtllm-autojudge <verb> [options]\n\nverbs:\n{rows}\n\n`trtllm-autojudge <verb> --help` for options."


def _load(verb: str):
    target, func, _, item = VERBS[verb]
    if importlib.util.find_spec(target) is None:
        raise SystemExit(f"`trtllm-autojudge {verb}` is not available in this version yet: it lands with work item {item}.")
    return getattr(importlib.import_module(target), func)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if not argv or argv[0] in ("-h", "--help"):
        print(_usage())
        return 0 if argv else 2
    verb, rest = argv[0], argv[1:]
    if verb not in VERBS:
        print(f"unknown verb {verb!r}\n\n{_usage()}", file=sys.stderr)
        return 2
    try:
        fn = _load(verb)
    except SystemExit as e:
        print(e, file=sys.stderr)
        return 2
    return int(fn(rest) or 0)


if __name__ == "__main__":
    sys.exit(main())

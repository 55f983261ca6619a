"""Generate a Triton model repository for the AutoJudge TensorRT-LLM 1.2 engines.

``python build_scripts/make_triton_repo.py --output_dir triton_repo --draft_engine_dir E/draft \\
    --target_engine_dir E/target --tokenizer_dir HF_TARGET``

Writes preprocessing, postprocessing, tensorrt_llm_draft (stock tensorrtllm backend),
autojudge_target and autojudge_bls (Python backend); see trtllm_autojudge/trt/triton/config.py.
Paths are written as given, made absolute: give the paths the Triton server will see.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from trtllm_autojudge.trt.triton.config import make_repository


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="make_triton_repo.py", description=__doc__.split("\n\n")[0])
    ap.add_argument("--output_dir", required=True, help="model repository to write (tritonserver --model-repository)")
    ap.add_argument("--draft_engine_dir", required=True)
    ap.add_argument("--target_engine_dir", required=True, help="AutoJudge target engine built with --tp_size 1")
    ap.add_argument("--tokenizer_dir", required=True)
    ap.add_argument("--max_batch_size", type=int, default=8, help="draft model's in-flight batch")
    ap.add_argument("--bls_instances", type=int, default=4, help="concurrent requests the BLS model serves")
    ap.add_argument("--kv_cache_fraction", type=float, default=0.4, help="GPU memory share of the draft's KV cache")
    return ap.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    absolute = lambda p: str(Path(p).expanduser().absolute())  # noqa: E731
    written = make_repository(args.output_dir, draft_engine_dir=absolute(args.draft_engine_dir),
                              target_engine_dir=absolute(args.target_engine_dir),
                              tokenizer_dir=absolute(args.tokenizer_dir), max_batch_size=args.max_batch_size,
                              bls_instances=args.bls_instances, kv_cache_fraction=args.kv_cache_fraction)
    for path in written:
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""AutoJudge in TensorRT-LLM's PyTorch backend through the LLM API (GPU host, TensorRT-LLM 1.2 line).

    python examples/pytorch_backend_llm_api.py --target TARGET --draft DRAFT --judge judge.safetensors [--threshold 0.3]
    python examples/pytorch_backend_llm_api.py --target TARGET --draft EAGLE3_DRAFT --judge judge.safetensors \
        --eagle_choices "[[0], [1], [0, 0], [0, 1], [1, 0], [0, 0, 0]]"

The judge replaces TorchSampler's greedy draft acceptance in this process
(trtllm_autojudge/trt/pytorch/sampler.py). Not run on the project's machines.
Without --eagle_choices the draft is a chain from a draft model (draft-target decoding). With it the
draft is a static tree from a two-model EAGLE3 drafter (`eagle3_one_model=False`: the one-model path
accepts inside the model, out of the sampler's reach); the 1.2 line flags static trees as experimental.
The draft model is named with `speculative_model_dir`, the field every 1.x release accepts (later
releases renamed it `speculative_model` and keep `speculative_model_dir` as an alias).
"""
import argparse
import ast
import os

os.environ.setdefault("TLLM_WORKER_USE_SINGLE_PROCESS", "1")  # keep the executor (and the hook) in this process


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--target", required=True)
    ap.add_argument("--draft", required=True)
    ap.add_argument("--judge", required=True)
    ap.add_argument("--threshold", type=float)
    ap.add_argument("--max_draft_len", type=int, default=8)
    ap.add_argument("--eagle_choices", type=ast.literal_eval,
                    help="a static draft tree, e.g. \"[[0], [1], [0, 0]]\" (--draft is then an EAGLE3 draft)")
    args = ap.parse_args()

    from tensorrt_llm import LLM, SamplingParams
    from tensorrt_llm.llmapi import DraftTargetDecodingConfig, EagleDecodingConfig

    from trtllm_autojudge.trt.pytorch.sampler import enable_autojudge

    stats = enable_autojudge(args.judge, threshold=args.threshold)
    if args.eagle_choices is None:
        spec = DraftTargetDecodingConfig(max_draft_len=args.max_draft_len, speculative_model_dir=args.draft)
    else:
        spec = EagleDecodingConfig(max_draft_len=max(len(c) for c in args.eagle_choices),
                                   speculative_model_dir=args.draft, eagle_choices=args.eagle_choices,
                                   eagle3_one_model=False)
    llm = LLM(model=args.target, disable_overlap_scheduler=True, cuda_graph_config=None, speculative_config=spec)
    prompts = ["Natalia sold clips to 48 of her friends in April, and then she sold half as many clips in May. "
               "How many clips did Natalia sell altogether in April and May?"]
    for out in llm.generate(prompts, SamplingParams(max_tokens=256, temperature=0.0)):
        print(out.outputs[0].text)
    print({"cycles": stats.cycles, "accepted": stats.accepted, "judged": stats.judged})


if __name__ == "__main__":
    main()

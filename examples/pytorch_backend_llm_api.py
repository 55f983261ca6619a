"""AutoJudge in TensorRT-LLM's PyTorch backend through the LLM API (GPU host, TensorRT-LLM 1.2 line).

    python examples/pytorch_backend_llm_api.py --target TARGET --draft DRAFT --judge judge.safetensors [--threshold 0.3]

The judge replaces TorchSampler's greedy draft acceptance in this process
(trtllm_autojudge/trt/pytorch/sampler.py). Not run on the project's machines.
The draft model is named with `speculative_model_dir`, the field every 1.x release accepts (later
releases renamed it `speculative_model` and keep `speculative_model_dir` as an alias).
"""
import argparse
import os

os.environ.setdefault("TLLM_WORKER_USE_SINGLE_PROCESS", "1")  # keep the executor (and the hook) in this process


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--target", required=True)
    ap.add_argument("--draft", required=True)
    ap.add_argument("--judge", required=True)
    ap.add_argument("--threshold", type=float)
    ap.add_argument("--max_draft_len", type=int, default=8)
    args = ap.parse_args()

    from tensorrt_llm import LLM, SamplingParams
    from tensorrt_llm.llmapi import DraftTargetDecodingConfig

    from trtllm_autojudge.trt.pytorch.sampler import enable_autojudge

    stats = enable_autojudge(args.judge, threshold=args.threshold)
    llm = LLM(model=args.target, disable_overlap_scheduler=True, cuda_graph_config=None,
              speculative_config=DraftTargetDecodingConfig(max_draft_len=args.max_draft_len,
                                                           speculative_model_dir=args.draft))
    prompts = ["Natalia sold clips to 48 of her friends in April, and then she sold half as many clips in May. "
               "How many clips did Natalia sell altogether in April and May?"]
    for out in llm.generate(prompts, SamplingParams(max_tokens=256, temperature=0.0)):
        print(out.outputs[0].text)
    print({"cycles": stats.cycles, "accepted": stats.accepted, "judged": stats.judged})


if __name__ == "__main__":
    main()

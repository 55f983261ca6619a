"""Regeneration on a GPU host: TensorRT-LLM's LLM API with KV-cache block reuse.

Written against the 1.2-line LLM API as read in the NVIDIA/TensorRT-LLM sources (named in
docs/mining.md): ``LLM(model, skip_tokenizer_init=..., max_seq_len=..., kv_cache_config=
KvCacheConfig(enable_block_reuse=True))``; ``LLM.generate(inputs, sampling_params, use_tqdm)``
takes a list of token-id lists and one :class:`SamplingParams` per input, and returns one
``RequestOutput`` per input whose ``outputs[0]`` carries ``token_ids`` (new tokens only),
``finish_reason`` ('stop' / 'length') and ``stop_reason`` (the stop token id for stop words).
Greedy is ``top_k=1`` with ``top_p`` unset (``SamplingParams._greedy_decoding``).

All regenerations of one mining round go in ONE ``generate`` call: the executor batches them in
flight, and block reuse makes the prefix they share with earlier requests (the prompt, the
response up to the mismatch) nearly free. The stop rule's ``is_final`` cannot run inside the
engine: the continuation runs to a stop token or the budget and :func:`.regeneration.serve` cuts
it where the answer became fixed (same tokens as stopping there, more of them generated).
"""
from __future__ import annotations

from typing import Sequence

from .regeneration import Continuation, RegenerationRequest


class TrtllmRegenerator:
    """A :class:`.regeneration.RegenerationBackend` on a ``tensorrt_llm.LLM``.

    ``forwarded`` counts prefix + generated tokens per request: an upper bound, as the tokens the
    block reuse saved are not visible through the API.
    """

    def __init__(self, llm, max_context: int):
        self.llm, self.max_context = llm, int(max_context)

    @classmethod
    def from_checkpoint(cls, model_dir: str, max_seq_len: int, **llm_kwargs) -> "TrtllmRegenerator":
        """Load a Hugging Face checkpoint folder (or engine folder) with block reuse on."""
        try:
            from tensorrt_llm import LLM
            from tensorrt_llm.llmapi import KvCacheConfig
        except ImportError as e:
            raise SystemExit("--regenerator trtllm needs TensorRT-LLM 1.2 (pip install tensorrt-llm==1.2.*) on a GPU host") from e
        llm = LLM(model=str(model_dir), skip_tokenizer_init=True, max_seq_len=int(max_seq_len),
                  kv_cache_config=KvCacheConfig(enable_block_reuse=True), **llm_kwargs)
        return cls(llm, max_seq_len)

    def sampling_params(self, request: RegenerationRequest):
        from tensorrt_llm import SamplingParams

        stops = sorted(request.stop_ids)
        return SamplingParams(max_tokens=request.budget, top_k=1, end_id=stops[0] if stops else -1,
                              stop_token_ids=stops or None, include_stop_str_in_output=True, detokenize=False)

    def generate(self, requests: Sequence[RegenerationRequest]) -> list[Continuation]:
        out = [Continuation([], 0) for _ in requests]
        live = [i for i, r in enumerate(requests) if not r.finished]
        if not live:
            return out
        results = self.llm.generate([list(requests[i].prefix) for i in live],
                                    sampling_params=[self.sampling_params(requests[i]) for i in live], use_tqdm=False)
        for i, result in zip(live, results):
            completion, request = result.outputs[0], requests[i]
            tokens = [int(t) for t in completion.token_ids]
            if completion.finish_reason == "stop" and request.stop_ids and (not tokens or tokens[-1] not in request.stop_ids):
                # an end_id stop leaves the end token out of token_ids: put it back, as greedy decoding emits it
                stop = completion.stop_reason if isinstance(completion.stop_reason, int) else min(request.stop_ids)
                tokens.append(int(stop))
            out[i] = Continuation(tokens, len(request.prefix) + len(tokens))
        return out

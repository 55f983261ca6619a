"""Regeneration on a GPU host: TensorRT-LLM's LLM API with KV-cache block reuse.

Written against the 1.2-line LLM API as read in the NVIDIA/TensorRT-LLM sources (named in
docs/mining.md): ``LLM(model, skip_tokenizer_init=..., max_seq_len=..., kv_cache_config=
KvCacheConfig(enable_block_reuse=True))``; ``LLM.generate(inputs, sampling_params, use_tqdm)``
takes a list of token-id lists and one :class:`SamplingParams` per input, and returns one
``RequestOutput`` per input whose ``outputs[0]`` carries ``token_ids`` (new tokens only),
``finish_reason`` ('stop' / 'length') and ``stop_reason`` (the stop token id for stop words).
Greedy is ``top_k=1`` with ``top_p`` unset (``SamplingParams._greedy_decoding``).

Everything queued when the miner collects goes in ONE ``generate`` call: the executor batches the
requests in flight, and block reuse makes the prefix they share with earlier requests (the prompt,
the response up to the mismatch) nearly free. (``LLM.generate_async`` would let finished prompts
refill the engine between calls, as the transformers backend does; not done.) The stop rule's ``is_final`` cannot run inside the
engine: the continuation runs to a stop token or the budget and :func:`.regeneration.serve` cuts
it where the answer became fixed (same tokens as stopping there, more of them generated).
"""
from __future__ import annotations

from collections import OrderedDict
from typing import Sequence

from .regeneration import Continuation, RegenerationRequest, RequestQueue


class TrtllmRegenerator(RequestQueue):
    """A :class:`.regeneration.RegenerationBackend` on a ``tensorrt_llm.LLM``.

    ``forwarded`` counts prefix + generated tokens per request: an upper bound, as the tokens the
    block reuse saved are not visible through the API.
    """

    def __init__(self, llm, max_context: int):
        super().__init__()
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

    def cancel(self, tickets: Sequence[int]) -> dict[int, int]:
        """Only requests not yet sent can be taken back (a generate call runs to its end)."""
        return {t: 0 for t in tickets if self.queue.pop(t, None) is not None}

    def collect(self) -> dict[int, Continuation]:
        """Everything queued, in ONE ``LLM.generate`` call."""
        batch, self.queue = self.queue, OrderedDict()
        out = {t: Continuation([], 0) for t, r in batch.items() if r.finished}
        live = [(t, r) for t, r in batch.items() if not r.finished]
        if not live:
            return out
        results = self.llm.generate([list(r.prefix) for _, r in live],
                                    sampling_params=[self.sampling_params(r) for _, r in live], use_tqdm=False)
        for (ticket, request), result in zip(live, results):
            completion = result.outputs[0]
            tokens = [int(t) for t in completion.token_ids]
            if completion.finish_reason == "stop" and request.stop_ids and (not tokens or tokens[-1] not in request.stop_ids):
                # an end_id stop leaves the end token out of token_ids: put it back, as greedy decoding emits it
                stop = completion.stop_reason if isinstance(completion.stop_reason, int) else min(request.stop_ids)
                tokens.append(int(stop))
            out[ticket] = Continuation(tokens, len(request.prefix) + len(tokens))
        return out

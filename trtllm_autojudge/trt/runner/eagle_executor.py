"""Run an EAGLE-route target (``build-engines --route eagle``) through TensorRT-LLM 1.2's executor: its own
EAGLE decoding, unchanged (``run-engines`` picks this for an engine with the ``autojudge_eagle`` block).

The executor is configured as TensorRT-LLM's LLM API configures it for an EAGLE engine
(``DecodingConfig(decoding_mode=DecodingMode.Eagle(), eagle_config=EagleConfig(...))``, greedy sampling:
exact-match acceptance) with the engine's tree (``eagle_choices``, or the EAGLE-2 rule) and the build's
threshold as the default ``posterior_threshold``; each request carries its own threshold as
``Request(eagle_config=EagleConfig(posterior_threshold=t))``, which the runtime hands the engine per
request (``eagleBuffers.cpp`` ``setPosteriorThresholds``). An engine built with ``threshold_source
engine`` takes no per-request threshold. Leader mode: under ``mpirun -n N`` only rank 0 enqueues.

The step loop the executor runs is :func:`.eagle_loop.eagle_generate`, tested on CPU against
:class:`.eagle_engine.ReferenceEagleEngine`; this module has not run (no TensorRT-LLM here).
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from ..engine.eagle_spec import EAGLE_BLOCK_KEY, EagleBlock, executor_eagle_config
from .executor_calls import _require_tensorrt_llm, leader_executor, route_target, run_requests


def request_thresholds(block: EagleBlock, requested: list[float | None]) -> list[float | None]:
    """Per request the threshold it sends (None: the executor's default, the build's); refuses a
    per-request threshold for an engine that reads none, and one the executor refuses (>= 1)."""
    given = [t for t in requested if t is not None]
    if given and block.threshold_source == "engine":
        raise ValueError(f"this engine was built with threshold_source engine: its threshold is {block.threshold}; "
                         f"rebuild with `build-engines --route eagle --threshold_source request` for per-request ones")
    bad = [t for t in given if not 0.0 <= t < 1.0]
    if bad:
        raise ValueError(f"thresholds {bad} lie outside [0, 1): TensorRT-LLM's EagleConfig refuses a posterior_threshold "
                         f"of 1 or more (0 is lossless)")
    return list(requested)


class ExecutorEagleTarget:
    """The EAGLE-route engine through the executor bindings (what ``ModelRunnerCpp`` wraps)."""

    def __init__(self, engine_dir: str | Path, *, end_id: int, pad_id: int, kv_cache_fraction: float | None = None,
                 gpu_weights_percent: float = 1.0):
        _require_tensorrt_llm()
        from tensorrt_llm.bindings import executor as trtllm

        config, self.block = route_target(engine_dir, EagleBlock, EAGLE_BLOCK_KEY, "eagle")
        self.trtllm, self.end_id, self.pad_id = trtllm, end_id, pad_id
        self.executor = leader_executor(trtllm, engine_dir, config, kv_cache_fraction, [],
                                        gpu_weights_percent=gpu_weights_percent, decoding_config=
                                        trtllm.DecodingConfig(decoding_mode=trtllm.DecodingMode.Eagle(),
                                                              eagle_config=trtllm.EagleConfig(
                                                                  **executor_eagle_config(self.block))))

    def generate(self, prompts: list[list[int]], thresholds: list[float | None], max_new_tokens: int) -> list[dict]:
        """Per prompt: ``tokens`` (generated, prompt excluded) and ``decoding_iter`` (engine steps)."""
        trtllm = self.trtllm
        requests = [trtllm.Request(
            input_token_ids=[int(t) for t in p], max_tokens=max_new_tokens, end_id=self.end_id, pad_id=self.pad_id,
            sampling_config=trtllm.SamplingConfig(beam_width=1, top_k=1),
            output_config=trtllm.OutputConfig(exclude_input_from_output=True),
            eagle_config=None if t is None else trtllm.EagleConfig(**{**executor_eagle_config(self.block),
                                                                       "posterior_threshold": float(t)}))
            for p, t in zip(prompts, request_thresholds(self.block, thresholds))]
        results = run_requests(self.executor, requests, "EAGLE target")
        return [{"tokens": list(r.output_token_ids[0]), "decoding_iter": int(getattr(r, "decoding_iter", 0) or 0)}
                for r in results]

    def shutdown(self) -> None:
        self.executor.shutdown()


def eagle_rows(requests: list[dict], outputs: list[dict], thresholds: list[float], tokenizer) -> list[dict]:
    """Result rows: the text and, per engine step, the tokens emitted and the accepted draft tokens."""
    rows = []
    for request, out, threshold in zip(requests, outputs, thresholds):
        steps = max(out["decoding_iter"], 1)
        rows.append(dict(request, threshold=float(threshold), text=tokenizer.decode(out["tokens"], skip_special_tokens=True),
                         new_tokens=len(out["tokens"]), cycles=out["decoding_iter"],
                         tokens_per_cycle=float(np.float64(len(out["tokens"])) / steps),
                         accepted_per_cycle=float(np.float64(len(out["tokens"])) / steps - 1.0)))
    return rows

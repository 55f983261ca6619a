"""The executor calls every route's runner makes (``ModelRunnerCpp``'s, read from the 1.2 sources):
the import guard, a route's target engine and its plugin library, a leader-mode executor on a built
engine, and enqueue-and-wait."""
from __future__ import annotations

import json
from pathlib import Path

from ..plugin.library import load_plugin_library


def _require_tensorrt_llm():
    try:
        import tensorrt_llm
    except ImportError as e:
        raise ImportError("tensorrt_llm is not importable: the engine runner needs a GPU host with "
                          "tensorrt-llm==1.2.* (docs/deploy.md)") from e
    return tensorrt_llm


def route_target(engine_dir: str | Path, block_type, key: str, route: str) -> tuple[dict, object]:
    """(config.json, its ``key`` block read by ``block_type.from_engine_config``) of a route's target
    engine, with the block's plugin library loaded (before an executor deserializes the engine)."""
    config = json.loads((Path(engine_dir) / "config.json").read_text())
    block = block_type.from_engine_config(config)
    if block is None:
        raise ValueError(f"{engine_dir} is not a {route}-route target (no {key} block in its config): build it with "
                         f"`build-engines --route {route}`")
    load_plugin_library(block.plugin_library)
    return config, block


def check_gpu_weights_percent(value: float, config: dict, engine_dir: str | Path) -> float:
    """``value`` when it is a share in [0, 1] that the engine can take: below 1 only for an engine
    built with ``--weight_streaming`` (its config's ``build_config.weight_streaming``), which
    TensorRT-LLM's own runtime does not check (tllmRuntime.cpp ignores it; docs/deploy.md)."""
    if not 0.0 <= value <= 1.0:
        raise ValueError(f"gpu_weights_percent is the share of the target's streamable weights kept on the GPU: give "
                         f"a number in [0, 1], got {value:g}")
    if value < 1.0 and not config.get("build_config", {}).get("weight_streaming"):
        raise ValueError(f"gpu_weights_percent {value:g}: {engine_dir} was built without weight streaming, so all its "
                         f"weights stay on the GPU; rebuild it with `build-engines --weight_streaming`, or give 1")
    return value


def leader_executor(trtllm, engine_dir: str | Path, config: dict, kv_cache_fraction: float | None,
                    additional_outputs: list, gather_generation_logits: bool = False, decoding_config=None,
                    gpu_weights_percent: float = 1.0):
    """An executor on a built engine in leader mode (only rank 0 enqueues), greedy, KV-cache block
    reuse on: the calls ``ModelRunnerCpp`` makes. ``gather_generation_logits``: the executor refuses
    a request with ``return_generation_logits`` unless this is set (or the engine was built with
    ``--gather_generation_logits``). ``decoding_config``: a ``DecodingConfig`` (the EAGLE route's).
    ``gpu_weights_percent``: the share of a weight-streaming engine's weights kept on the GPU
    (``ExecutorConfig``'s keyword, as ``ModelRunnerCpp.from_dir`` passes it)."""
    kv = trtllm.KvCacheConfig(enable_block_reuse=True, free_gpu_memory_fraction=kv_cache_fraction)
    executor_config = trtllm.ExecutorConfig(max_batch_size=int(config["build_config"]["max_batch_size"]),
                                            max_beam_width=1, kv_cache_config=kv,
                                            gpu_weights_percent=check_gpu_weights_percent(
                                                gpu_weights_percent, config, engine_dir))
    executor_config.gather_generation_logits = gather_generation_logits
    if additional_outputs:
        executor_config.additional_model_outputs = additional_outputs
    if decoding_config is not None:
        executor_config.decoding_config = decoding_config
    executor_config.parallel_config = trtllm.ParallelConfig(trtllm.CommunicationType.MPI,
                                                            trtllm.CommunicationMode.LEADER, device_ids=None,
                                                            orchestrator_config=None)
    return trtllm.Executor(Path(engine_dir), trtllm.ModelType.DECODER_ONLY, executor_config)


def run_requests(executor, requests, role: str) -> list:
    """Enqueue ``requests``, wait for every final result; results in request order."""
    ids = executor.enqueue_requests(requests)
    results = {}
    while len(results) < len(ids):
        for response in executor.await_responses():
            if response.has_error():
                raise RuntimeError(f"the {role} engine failed a request: {response.error_msg}")
            if response.result.is_final:
                results[response.request_id] = response.result
    return [results[i] for i in ids]

"""The EAGLE route's Triton repository: the TensorRT-LLM backend's own models serving an EAGLE-route
engine (``build-engines --route eagle``), no custom Python model.

Models: ``preprocessing``, ``postprocessing``, ``tensorrt_llm`` (the EAGLE engine, ``decoding_mode
"eagle"``) and ``tensorrt_llm_bls`` without a draft model (it sends plain requests; the engine drafts
and verifies its trees itself). Templates and filling as on the stock route (:mod:`.stock`).

What the backend can give the engine decides which builds it serves. Its ``model_instance_state.cc``
(TensorRT-LLM 1.2 line) reads ``decoding_mode`` and ``eagle_choices`` and builds the executor's
``EagleConfig(eagleChoices)``: no dynamic tree, and no per-request ``EagleConfig``, so every request
would carry the runtime's default ``posterior_threshold`` (0.09, ``eagleBuffers.h``). So the engine
must be built with a static tree and ``--threshold_source engine`` (its one threshold in the engine);
others are refused naming the build flag to change. ``eagle_choices`` is written in the form the
backend's ``utils::csvStrToVecVecInt`` parses: ``{0}, {0, 0}, {1}``.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Sequence

from ..engine.eagle_spec import EagleBlock
from .stock import TARGET_MODEL, engine_parameters, text_parameters, write_models

EAGLE_MODELS = ("preprocessing", "postprocessing", TARGET_MODEL, "tensorrt_llm_bls")


def eagle_choices_parameter(choices: Sequence[Sequence[int]]) -> str:
    """The ``eagle_choices`` parameter string: ``{0}, {0, 0}, {1}`` (one brace group per node's path)."""
    return ", ".join("{" + ", ".join(str(int(r)) for r in path) + "}" for path in choices)


def served_block(engine_config: dict) -> EagleBlock:
    """The engine's EAGLE block, refused unless the tensorrtllm backend can serve it (see the module doc)."""
    block = EagleBlock.from_engine_config(engine_config)
    if block is None:
        raise ValueError("the target engine has no autojudge_eagle block: build it with `build-engines --route eagle`")
    problems = []
    if block.eagle_choices is None:
        problems.append("a static tree (--eagle_choices): the backend builds EagleConfig(eagle_choices) only, no "
                        "EAGLE-2 dynamic tree")
    if block.threshold_source != "engine":
        problems.append("--threshold_source engine: the backend sets no per-request EagleConfig, so requests would "
                        "carry the runtime's default posterior_threshold 0.09 as the judge's threshold")
    if problems:
        raise ValueError("Triton's tensorrtllm backend cannot serve this EAGLE engine as built; rebuild it with "
                         + "; and ".join(problems) + " (or serve it with run-engines)")
    return block


def eagle_parameters(block: EagleBlock, *, target_engine_dir: str, tokenizer_dir: str, max_batch_size: int = 8,
                     bls_instances: int = 4, kv_cache_fraction: float = 0.4, target_gpus: str = "",
                     target_gpu_weights_percent: float = 1.0) -> dict[str, dict[str, str]]:
    """Placeholder values per model, beyond :data:`.stock.TEMPLATE_DEFAULTS`."""
    engine = engine_parameters(engine_dir=target_engine_dir, max_batch_size=max_batch_size,
                               kv_cache_fraction=kv_cache_fraction, gpus=target_gpus, decoding_mode="eagle",
                               gpu_weights_percent=str(target_gpu_weights_percent),
                               eagle_choices=eagle_choices_parameter(block.eagle_choices))
    return {**text_parameters(tokenizer_dir=tokenizer_dir, max_batch_size=max_batch_size, bls_instances=bls_instances,
                              draft_model=None), TARGET_MODEL: engine}


def make_eagle_repository(out_dir: str | Path, backend_models_dir: str | Path, *, target_engine_dir: str,
                          engine_config: str | Path | None = None, **params) -> list[Path]:
    """Write the repository; the engine's tree and threshold source come from its config.json
    (``engine_config``, default ``target_engine_dir/config.json``: read here, so run this where the
    engine is visible). Keyword arguments: :func:`eagle_parameters`. Returns the config.pbtxt paths."""
    config_path = Path(engine_config or Path(target_engine_dir) / "config.json")
    if not config_path.is_file():
        raise FileNotFoundError(f"{config_path} does not exist: make-triton-repo --route eagle reads the engine's "
                                f"config.json for its tree (give --engine_config when the server's path differs)")
    block = served_block(json.loads(config_path.read_text()))
    values = eagle_parameters(block, target_engine_dir=target_engine_dir, **params)
    return write_models(out_dir, backend_models_dir, {name: values[name] for name in EAGLE_MODELS})

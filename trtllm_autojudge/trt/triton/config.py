"""A Triton Inference Server model repository for the AutoJudge engine path (TensorRT-LLM 1.2 era).

Models (``<repo>/<name>/config.pbtxt`` + ``<repo>/<name>/1/model.py`` for Python models):

- ``preprocessing`` / ``postprocessing`` (Python): text <-> token ids with the pair's tokenizer;
- ``tensorrt_llm_draft`` (backend ``tensorrtllm``): the stock draft engine, in-flight batching;
  inputs/outputs/parameters named as in TensorRT-LLM's ``triton_backend/all_models/inflight_batcher_llm/
  tensorrt_llm``. The backend never sets ``ExecutorConfig.gather_generation_logits``, so the draft
  returns the generation logits a chain tree's siblings need (``draft_width`` > 1) only when built
  with ``--gather_generation_logits`` (``build-engines --width`` > 1; :func:`check_draft_width`);
- ``autojudge_target`` (Python, one GPU): the AutoJudge target engine through
  ``tensorrt_llm.runtime.Session``; one verification cycle in (with ``greedy_child`` for a lookahead
  judge, the engine input ``autojudge_greedy_child``), the plugin's outputs out;
- ``autojudge_bls`` (Python, BLS): the speculative loop, reading the AutoJudge outputs (accepted
  tokens, lengths, judged counts) each cycle. Request parameters: ``threshold`` or ``answer_budget``
  (the threshold the judge's certificate proves within a share of answers changed) and
  ``num_draft_tokens`` (plus ``draft_width`` for chain trees); per-request metrics come back as
  outputs.

The repository serves target-only judges (:mod:`..engine.routes`): its draft is the stock model,
which returns no hidden states for the blocks DD and DD1. The Python model files live in
``trtllm_autojudge/trt/triton/models/`` and are copied in; they need this package and TensorRT-LLM
1.2 installed in Triton's Python environment.
"""
from __future__ import annotations

import shutil
from pathlib import Path

from .pbtxt import Enum, parameters, to_pbtxt
from .tensors import ACCEPTANCE_TENSORS, CYCLE_TENSORS, OPTIONAL_CYCLE_TENSORS

MODELS = ("preprocessing", "postprocessing", "tensorrt_llm_draft", "autojudge_target", "autojudge_bls")
MODEL_SOURCES = Path(__file__).with_name("models")


def _io(name: str, kind: str, dims: list[int], **extra) -> dict:
    return {"name": name, "data_type": Enum(kind), "dims": dims, **extra}


def _scalar_in(name: str, kind: str, optional: bool = True) -> dict:
    return _io(name, kind, [1], reshape={"shape": []}, optional=optional)


def python_model(name: str, inputs: list[dict], outputs: list[dict], params: dict[str, str], kind: str = "KIND_CPU",
                 count: int = 1) -> dict:
    return {"name": name, "backend": "python", "max_batch_size": 0, "input": inputs, "output": outputs,
            "instance_group": [{"count": count, "kind": Enum(kind)}], "parameters": parameters(params)}


def draft_model_config(engine_dir: str, max_batch_size: int, kv_cache_fraction: float) -> dict:
    """The stock ``tensorrt_llm`` model serving the draft engine (names as in tensorrtllm_backend)."""
    return {
        "name": "tensorrt_llm_draft", "backend": "tensorrtllm", "max_batch_size": max_batch_size,
        "model_transaction_policy": {"decoupled": False},
        "dynamic_batching": {"preferred_batch_size": [max_batch_size], "max_queue_delay_microseconds": 100},
        "input": [
            _io("input_ids", "TYPE_INT32", [-1], allow_ragged_batch=True),
            _io("input_lengths", "TYPE_INT32", [1], reshape={"shape": []}),
            _io("request_output_len", "TYPE_INT32", [1]),
            _scalar_in("end_id", "TYPE_INT32"),
            _scalar_in("pad_id", "TYPE_INT32"),
            _scalar_in("runtime_top_k", "TYPE_INT32"),
            _scalar_in("return_generation_logits", "TYPE_BOOL"),
        ],
        "output": [
            _io("output_ids", "TYPE_INT32", [-1, -1]),
            _io("sequence_length", "TYPE_INT32", [-1]),
            _io("generation_logits", "TYPE_FP32", [-1, -1, -1]),
        ],
        "instance_group": [{"count": 1, "kind": Enum("KIND_CPU")}],
        "parameters": parameters({
            "max_beam_width": "1",
            "FORCE_CPU_ONLY_INPUT_TENSORS": "no",
            "gpt_model_type": "inflight_fused_batching",
            "gpt_model_path": engine_dir,
            "batch_scheduler_policy": "guaranteed_no_evict",
            "kv_cache_free_gpu_mem_fraction": str(kv_cache_fraction),
            "enable_kv_cache_reuse": "true",
            "exclude_input_in_output": "false",
        }),
    }


def check_draft_width(width: int, draft_engine_config: dict) -> None:
    """Refuse ``draft_width`` > 1 when the draft engine (its ``config.json``) was built without
    ``--gather_generation_logits``: the tensorrtllm backend would fail the request."""
    if width > 1 and not draft_engine_config.get("build_config", {}).get("gather_generation_logits", False):
        raise ValueError(f"draft_width {width} needs the draft's generation logits, which the tensorrtllm backend "
                         f"returns only from an engine built with --gather_generation_logits: rebuild the draft with "
                         f"build-engines --width {width}, or ask with draft_width 1")


def repository_configs(*, draft_engine_dir: str, target_engine_dir: str, tokenizer_dir: str, max_batch_size: int = 8,
                       bls_instances: int = 4, kv_cache_fraction: float = 0.4, decoupled: bool = False,
                       task: str = "", target_gpu_weights_percent: float = 1.0) -> dict[str, dict]:
    """Model name -> ModelConfig (as a dict for :func:`.pbtxt.to_pbtxt`). ``decoupled``: the BLS answers
    through its response sender (streaming, and HTTP through the ``generate`` endpoint only); ``task``:
    ``preprocessing`` puts the text into that task's prompt format; ``target_gpu_weights_percent``: the
    share of a weight-streaming target engine's weights kept on the GPU (docs/deploy.md)."""
    tok = {"tokenizer_dir": tokenizer_dir}
    cycle_in = [_io(n, k, d, **({"optional": True} if n in OPTIONAL_CYCLE_TENSORS else {}))
                for n, (k, d) in CYCLE_TENSORS.items()]
    acc_out = [_io(n, k, d) for n, (k, d) in ACCEPTANCE_TENSORS.items()]
    bls = python_model(
        "autojudge_bls",
        [_io("text_input", "TYPE_STRING", [1]), _io("max_tokens", "TYPE_INT32", [1]),
         _io("threshold", "TYPE_FP32", [1], optional=True), _io("answer_budget", "TYPE_FP32", [1], optional=True),
         _io("num_draft_tokens", "TYPE_INT32", [1], optional=True),
         _io("draft_width", "TYPE_INT32", [1], optional=True), _io("stream", "TYPE_BOOL", [1], optional=True)],
        [_io("text_output", "TYPE_STRING", [1]), _io("output_ids", "TYPE_INT32", [-1]),
         _io("accepted_lengths", "TYPE_INT32", [-1]), _io("judged_counts", "TYPE_INT32", [-1]),
         _io("cycles", "TYPE_INT32", [1])],
        {"tokenizer_dir": tokenizer_dir, "target_engine_dir": target_engine_dir,
         "draft_engine_dir": draft_engine_dir,  # check_draft_width reads its config.json
         "draft_model_name": "tensorrt_llm_draft", "target_model_name": "autojudge_target",
         "preprocessing_model_name": "preprocessing", "postprocessing_model_name": "postprocessing"},
        count=bls_instances)
    bls["model_transaction_policy"] = {"decoupled": decoupled}
    return {
        "preprocessing": python_model("preprocessing", [_io("text_input", "TYPE_STRING", [1])],
                                      [_io("input_ids", "TYPE_INT32", [-1])], {**tok, **({"task": task} if task else {})}),
        "postprocessing": python_model("postprocessing", [_io("tokens", "TYPE_INT32", [-1])],
                                       [_io("text_output", "TYPE_STRING", [1])], tok),
        "tensorrt_llm_draft": draft_model_config(draft_engine_dir, max_batch_size, kv_cache_fraction),
        "autojudge_target": python_model("autojudge_target", cycle_in, acc_out,
                                         {"engine_dir": target_engine_dir,
                                          "gpu_weights_percent": str(target_gpu_weights_percent)}, kind="KIND_GPU"),
        "autojudge_bls": bls,
    }


def make_repository(out_dir: str | Path, **kwargs) -> list[Path]:
    """Write the repository; returns the config.pbtxt paths. Keyword arguments: :func:`repository_configs`."""
    return write_repository(out_dir, repository_configs(**kwargs))


def write_repository(out_dir: str | Path, configs: dict[str, dict], sources: dict[str, str] | None = None) -> list[Path]:
    """Write each model's config.pbtxt and, for a Python model, its ``1/model.py``: the file
    ``models/<source>.py`` of this package, ``source`` from ``sources`` (default the model's name).
    Returns the config.pbtxt paths."""
    out = Path(out_dir)
    written = []
    for name, config in configs.items():
        model_dir = out / name
        (model_dir / "1").mkdir(parents=True, exist_ok=True)
        path = model_dir / "config.pbtxt"
        path.write_text(to_pbtxt(config))
        written.append(path)
        if config["backend"] == "python":
            source = (sources or {}).get(name, name)
            shutil.copyfile(MODEL_SOURCES / f"{source}.py", model_dir / "1" / "model.py")
    return written

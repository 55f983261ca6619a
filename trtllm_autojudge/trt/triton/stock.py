"""The stock route's Triton repository: the TensorRT-LLM backend's own draft-target models, no
custom Python model.

Models: ``preprocessing``, ``postprocessing``, ``tensorrt_llm`` (the stock-route target engine),
``tensorrt_llm_draft`` (the draft engine) and ``tensorrt_llm_bls`` (the stock BLS, whose
``tensorrt_llm_draft_model_name`` parameter turns on its draft-target loop: per request a draft
request, then a fresh target request with ``draft_input_ids``). The model files and config
templates are the user's TensorRT-LLM checkout's (:data:`TEMPLATES_SUBDIR`, of the release they
installed; they left the tensorrtllm_backend repository in 2025), so configs and ``model.py`` files
agree. This module copies them and fills the ``${name}`` placeholders with concrete values, the
parameters of TensorRT-LLM's draft-target recipe (``examples/draft_target_model/README.md``), and
writes the draft model as a renamed copy of ``tensorrt_llm``, as that recipe does.

Filling follows ``triton_backend/tools/fill_template.py``: each value given for a model must be a
placeholder of its template (the tool asserts it), :data:`TEMPLATE_DEFAULTS` fill wherever they
appear, and a placeholder left unfilled inside a quoted string is an unset parameter. One left
outside quotes would not parse, and is refused.
"""
from __future__ import annotations

import re
import shutil
from pathlib import Path

STOCK_MODELS = ("preprocessing", "postprocessing", "tensorrt_llm", "tensorrt_llm_draft", "tensorrt_llm_bls")
TARGET_MODEL, DRAFT_MODEL = "tensorrt_llm", "tensorrt_llm_draft"
TEMPLATES_SUBDIR = "triton_backend/all_models/inflight_batcher_llm"  # in a TensorRT-LLM checkout
# Filled where a template has them, never asserted: fill_template.py's own defaults (the queue
# settings), and the tensor data types, which releases add to and drop from single models.
TEMPLATE_DEFAULTS = {"max_queue_size": "0", "max_queue_delay_microseconds": "0", "logits_datatype": "TYPE_FP32",
                     "encoder_input_features_data_type": "TYPE_FP16", "prompt_embedding_table_data_type": "TYPE_FP16"}
_PLACEHOLDER = re.compile(r"\$\{(\w+)\}")


def engine_parameters(*, engine_dir: str, max_batch_size: int, kv_cache_fraction: float, gpus: str = "",
                      **extra: str) -> dict[str, str]:
    """One ``tensorrtllm``-backend model's values: ``gpus`` its ``gpu_device_ids`` ("0,1"; empty leaves the
    backend's default), ``extra`` more placeholders of the template."""
    return {"triton_max_batch_size": str(max_batch_size), "triton_backend": "tensorrtllm", "decoupled_mode": "false",
            "max_beam_width": "1", "batching_strategy": "inflight_fused_batching",
            "kv_cache_free_gpu_mem_fraction": str(kv_cache_fraction), "exclude_input_in_output": "true",
            "engine_dir": engine_dir, **({"gpu_device_ids": gpus} if gpus else {}), **extra}


def text_parameters(*, tokenizer_dir: str, max_batch_size: int, bls_instances: int,
                    draft_model: str | None) -> dict[str, dict[str, str]]:
    """The values of ``preprocessing``, ``postprocessing`` and ``tensorrt_llm_bls`` (whose draft-target
    loop runs when ``draft_model`` names the draft's model, and is off when it is None)."""
    batch = {"triton_max_batch_size": str(max_batch_size)}
    draft = {} if draft_model is None else {"tensorrt_llm_draft_model_name": draft_model}
    return {
        "preprocessing": {**batch, "tokenizer_dir": tokenizer_dir, "preprocessing_instance_count": "1"},
        "postprocessing": {**batch, "tokenizer_dir": tokenizer_dir, "postprocessing_instance_count": "1"},
        "tensorrt_llm_bls": {**batch, "decoupled_mode": "false", "bls_instance_count": str(bls_instances),
                             "accumulate_tokens": "false", "tensorrt_llm_model_name": TARGET_MODEL, **draft},
    }


def stock_parameters(*, target_engine_dir: str, draft_engine_dir: str, tokenizer_dir: str, max_batch_size: int = 8,
                     bls_instances: int = 4, kv_cache_fraction: float = 0.4, target_gpus: str = "",
                     draft_gpus: str = "", target_gpu_weights_percent: float = 1.0) -> dict[str, dict[str, str]]:
    """Placeholder values per model, beyond :data:`TEMPLATE_DEFAULTS`. ``*_gpus``: the
    ``gpu_device_ids`` of each engine ("0,1"); empty leaves the backend's default.
    ``target_gpu_weights_percent``: the target's ``gpu_weights_percent`` (the share of a
    weight-streaming engine's weights kept on the GPU; the draft keeps all of its own)."""
    engine = dict(max_batch_size=max_batch_size, kv_cache_fraction=kv_cache_fraction,
                  enable_kv_cache_reuse="true")  # the draft-target target requires block reuse
    return {**text_parameters(tokenizer_dir=tokenizer_dir, max_batch_size=max_batch_size, bls_instances=bls_instances,
                              draft_model=DRAFT_MODEL),
            TARGET_MODEL: engine_parameters(engine_dir=target_engine_dir, gpus=target_gpus,
                                            gpu_weights_percent=str(target_gpu_weights_percent), **engine),
            DRAFT_MODEL: engine_parameters(engine_dir=draft_engine_dir, gpus=draft_gpus, **engine)}


def fill_template(text: str, values: dict[str, str], model: str) -> str:
    """Replace ``${name}`` by ``values[name]`` or :data:`TEMPLATE_DEFAULTS`; refuse a value whose
    placeholder the template lacks, and a placeholder left outside a quoted string."""
    present = set(_PLACEHOLDER.findall(text))
    absent = sorted(set(values) - present)
    if absent:
        raise ValueError(f"{model}/config.pbtxt has no placeholder {absent}: it is not a TensorRT-LLM 1.2 template "
                         f"(take them from your TensorRT-LLM checkout's {TEMPLATES_SUBDIR}), or this release renamed "
                         f"them; fill_template.py would refuse these keys too")
    fill = {**TEMPLATE_DEFAULTS, **values}
    filled = _PLACEHOLDER.sub(lambda m: fill.get(m.group(1), m.group(0)), text)
    unquoted = []
    for line in filled.splitlines():
        code = line.split("#", 1)[0]
        outside = re.sub(r'"(?:[^"\\]|\\.)*"', "", code)
        unquoted += _PLACEHOLDER.findall(outside)
    if unquoted:
        raise ValueError(f"{model}/config.pbtxt: no value for {sorted(set(unquoted))} (outside a string, so the config "
                         f"would not parse): this template is newer than make-triton-repo knows; fill them by hand")
    return filled


def template_dir(path: str | Path) -> Path:
    """The folder holding the model templates: ``path`` itself, or ``path/`` :data:`TEMPLATES_SUBDIR`
    when ``path`` is a TensorRT-LLM checkout."""
    path = Path(path)
    for candidate in (path, path / TEMPLATES_SUBDIR):
        if (candidate / TARGET_MODEL / "config.pbtxt").is_file():
            return candidate
    raise FileNotFoundError(f"{path} holds no {TARGET_MODEL}/config.pbtxt: give --backend_models_dir your TensorRT-LLM "
                            f"checkout (of the installed release) or its {TEMPLATES_SUBDIR}; the templates left the "
                            f"tensorrtllm_backend repository (all_models/inflight_batcher_llm) in 2025")


def write_models(out_dir: str | Path, backend_models_dir: str | Path, values: dict[str, dict[str, str]]) -> list[Path]:
    """Copy the models ``values`` names from ``backend_models_dir`` (see :func:`template_dir`; the draft
    model from ``tensorrt_llm``, renamed) into ``out_dir``, filling their configs; returns the
    config.pbtxt paths."""
    source, out = template_dir(backend_models_dir), Path(out_dir)
    sources = {name: source / (TARGET_MODEL if name == DRAFT_MODEL else name) for name in values}
    missing = [str(p / "config.pbtxt") for p in sources.values() if not (p / "config.pbtxt").is_file()]
    if missing:
        raise FileNotFoundError(f"{missing} do not exist: {source} is not a complete {TEMPLATES_SUBDIR} (take it from "
                                f"the TensorRT-LLM checkout of the installed release)")
    written = []
    for name, model_source in sources.items():
        model_dir = out / name
        if model_dir.exists():
            shutil.rmtree(model_dir)
        shutil.copytree(model_source, model_dir)
        text = (model_source / "config.pbtxt").read_text()
        if name == DRAFT_MODEL:
            text = text.replace(f'name: "{TARGET_MODEL}"', f'name: "{DRAFT_MODEL}"')
        path = model_dir / "config.pbtxt"
        path.write_text(fill_template(text, values[name], name))
        written.append(path)
    return written


def make_stock_repository(out_dir: str | Path, backend_models_dir: str | Path, **params) -> list[Path]:
    """Write the repository from ``backend_models_dir`` (see :func:`template_dir`); returns the
    config.pbtxt paths. Keyword arguments: :func:`stock_parameters`."""
    values = stock_parameters(**params)
    return write_models(out_dir, backend_models_dir, {name: values[name] for name in STOCK_MODELS})

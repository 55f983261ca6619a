"""The TensorRT / TensorRT-LLM 1.2 engine path.

Pure modules (import anywhere): :mod:`.contract` (plugin contract), :mod:`.fields` (plugin fields
from a judge file), :mod:`.io_spec` (target engine I/O), :mod:`.packing` (cycle inputs),
:mod:`.loop` (engine-path speculative loop), :mod:`.reference_engine` (the engines' CPU
specification), :mod:`.triton_config` (Triton model repository).
TensorRT modules (import ``tensorrt`` / ``tensorrt_llm`` only when called): :mod:`.library`,
:mod:`.network`, :mod:`.convert`. :mod:`.model_cls` is loaded by ``trtllm-build`` only.
"""
from pathlib import Path


def model_cls_path() -> Path:
    """The file to pass to ``trtllm-build --model_cls_file``."""
    return Path(__file__).with_name("model_cls.py")

"""The TensorRT / TensorRT-LLM 1.2 engine path (docs/deploy.md).

Pure modules (import anywhere): :mod:`.contract` (plugin contract), :mod:`.fields` (plugin fields
from a judge file), :mod:`.io_spec` (target engine I/O and config block), :mod:`.draft_spec` (the
DD-DT draft engine's hidden-state output and config block), :mod:`.packing` (cycle inputs, chain
trees), :mod:`.drafts` (drafts from a draft engine's outputs), :mod:`.chain_drafter` (chain-tree
drafting on a draft engine), :mod:`.loop` (the engine-path speculative loop),
:mod:`.reference_engine` (the engines' CPU specification),
:mod:`.tp` (tensor-parallel agreement), :mod:`.pbtxt` / :mod:`.triton_io` /
:mod:`.triton_config` (Triton model repository).
Modules that import ``tensorrt`` / ``tensorrt_llm`` / ``mpi4py`` only when called: :mod:`.library`,
:mod:`.network`, :mod:`.convert`, :mod:`.tp_pool`. :mod:`.model_cls` and :mod:`.draft_model_cls` are
loaded by ``trtllm-build`` only; ``triton_models/`` runs inside Triton only.
"""
from pathlib import Path


def model_cls_path() -> Path:
    """The file to pass to ``trtllm-build --model_cls_file``."""
    return Path(__file__).with_name("model_cls.py")


def draft_model_cls_path() -> Path:
    """The draft's ``trtllm-build --model_cls_file`` for a DD-DT judge (returns its hidden states)."""
    return Path(__file__).with_name("draft_model_cls.py")

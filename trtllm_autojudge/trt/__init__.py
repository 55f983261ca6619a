"""The TensorRT / TensorRT-LLM 1.2 engine path (docs/deploy.md), by concern:

- :mod:`.plugin`: the AutoJudgeAccept plugin seen from Python: its contract, the fields read from a
  judge file, loading the library, inserting it into a TensorRT network (the packed-step rule of its
  logits mode, the Python reference the host core and kernels are tested against, is
  :mod:`trtllm_autojudge.spec.packed_step`);
- :mod:`.engine`: the engine model classes ``trtllm-build --model_cls_file`` loads, their config
  blocks and I/O specs, and the checkpoint conversion;
- :mod:`.runner`: the loops that drive built engines (the context route's packed cycles and
  reference engines, the stock route's executor draft-target loop, tensor-parallel agreement) and
  the TensorRT-LLM engines themselves (:mod:`.runner.engines`, ``trtllm-autojudge run-engines``);
- :mod:`.triton`: Triton model repositories for both routes;
- :mod:`.pytorch`: the judge rule in TensorRT-LLM's PyTorch backend (``TorchSampler``).

Three routes (docs/deploy.md says when to use which): ``context`` (a cache-free target engine that
takes AutoJudge inputs and returns the accepted tokens; trees, per-request thresholds), ``stock``
(a stock ``draft_tokens_external`` target whose logits the plugin rewrites; KV cache, executor,
Triton's draft-target BLS and tensor parallelism unchanged) and ``eagle`` (TensorRT-LLM's EAGLE
engine, whose tree logits the plugin rewrites before its stock accept step; KV cache, trees drafted
inside the engine, per-request thresholds).

Everything here imports ``tensorrt`` / ``tensorrt_llm`` / ``mpi4py`` only when called, except the
model-class files (loaded by ``trtllm-build`` only) and ``triton/models`` (run inside Triton only).
"""
from pathlib import Path

ENGINE_DIR = Path(__file__).with_name("engine")


def model_cls_path() -> Path:
    """The context route's target ``trtllm-build --model_cls_file``."""
    return ENGINE_DIR / "target_model_cls.py"


def draft_model_cls_path() -> Path:
    """The draft's ``trtllm-build --model_cls_file`` for a DD-DT judge (returns its hidden states)."""
    return ENGINE_DIR / "draft_model_cls.py"


def stock_model_cls_path() -> Path:
    """The stock route's target ``trtllm-build --model_cls_file`` (logits rewritten by the plugin)."""
    return ENGINE_DIR / "stock_model_cls.py"


def eagle_model_cls_path() -> Path:
    """The EAGLE route's target ``trtllm-build --model_cls_file`` (EAGLE engine, tree logits rewritten)."""
    return ENGINE_DIR / "eagle_model_cls.py"

"""The CUDA binding of ``torch.ops.autojudge``, built on first use with torch's extension tools.

GPU hosts only. ``torch.utils.cpp_extension.load`` compiles ``plugins/torch/accept_op.cpp`` and
the kernels of ``plugins/src/kernels/`` for the visible GPUs (or ``$TORCH_CUDA_ARCH_LIST``) into
``build/torch_ext`` (``$AUTOJUDGE_TORCH_EXT_DIR`` moves it). It needs a CUDA build of torch and
an nvcc of the same CUDA major version as ``torch.version.cuda``, and ninja.
"""
from __future__ import annotations

import functools
import os
from pathlib import Path
from types import ModuleType

from .plugin_build import REPO, SOURCE_DIR

KERNEL_SOURCES = ("score_nodes.cu", "accept_tree.cu", "rewrite_logits.cu", "rewrite_tree_logits.cu")


@functools.lru_cache(maxsize=None)
def cuda_extension() -> ModuleType:
    """The compiled extension module (``accept``, ``rewrite_logits``, ``rewrite_tree_logits``); built once per process."""
    import torch
    from torch.utils.cpp_extension import is_ninja_available, load

    if torch.version.cuda is None or not torch.cuda.is_available():
        raise RuntimeError("torch.ops.autojudge on CUDA tensors needs a CUDA build of torch and a visible GPU "
                           f"(this torch is {torch.__version__}, CUDA available: {torch.cuda.is_available()}); "
                           "CPU tensors run the host core")
    if not is_ninja_available():
        raise RuntimeError("torch.utils.cpp_extension needs ninja to build the CUDA op: pip install ninja")
    binding = SOURCE_DIR / "torch" / "accept_op.cpp"
    if not binding.is_file():
        raise FileNotFoundError(f"{binding} is missing: the CUDA op is built from a source checkout of the repository")
    build_dir = Path(os.environ.get("AUTOJUDGE_TORCH_EXT_DIR", REPO / "build" / "torch_ext"))
    build_dir.mkdir(parents=True, exist_ok=True)
    return load(
        name="autojudge_cuda_ops",
        sources=[str(binding)] + [str(SOURCE_DIR / "src" / "kernels" / s) for s in KERNEL_SOURCES],
        extra_include_paths=[str(SOURCE_DIR / "include"), str(SOURCE_DIR / "src")],
        extra_cflags=["-O3"],
        extra_cuda_cflags=["-O3"],
        build_directory=str(build_dir),
    )

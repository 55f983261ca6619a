#!/usr/bin/env python3
"""Build the AutoJudge acceptance libraries in ``plugins/`` with CMake: the host core, the TensorRT
plugin with its CUDA kernels, and the plugin's host harness (``trtllm-autojudge build-plugin``).

    python build_scripts/build_plugin.py [--build-dir DIR] [--host-only] [--tensorrt-root DIR] ...

The builder lives in the package (:mod:`trtllm_autojudge.ops.plugin_build`), which also builds the
host core on first use; ``--help`` lists every option.
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from trtllm_autojudge.ops.plugin_build import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())

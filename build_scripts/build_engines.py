#!/usr/bin/env python3
"""Build the TensorRT-LLM 1.2 engines of an AutoJudge route (``trtllm-autojudge build-engines``):
``--route context`` (default), ``stock`` or ``eagle``, ``--dry-run`` to print the commands.

    python build_scripts/build_engines.py --route stock --draft_model_dir D --target_model_dir T \\
        --plugin_lib build/plugins/lib/libautojudge_trt_plugin.so --output_dir work --depth 16 --dry-run

The builder lives in the package (:mod:`trtllm_autojudge.trt.build_engines`, whose docstring says
what each route builds); ``--help`` lists every option.
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from trtllm_autojudge.trt.build_engines import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())

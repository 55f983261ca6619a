#!/usr/bin/env python3
"""Write a Triton model repository for the AutoJudge engines, or for the CPU route
(``trtllm-autojudge make-triton-repo``): ``--route context`` (default), ``stock``, ``eagle`` or ``cpu``.

    python build_scripts/make_triton_repo.py --route cpu --output_dir triton_repo

The writer lives in the package (:mod:`trtllm_autojudge.trt.triton.make_repo`, whose docstring says
what each route writes); ``--help`` lists every option.
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from trtllm_autojudge.trt.triton.make_repo import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())

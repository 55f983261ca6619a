"""Triton Python-backend model files, copied into a model repository by
:func:`trtllm_autojudge.trt.triton.config.make_repository`. They import
``triton_python_backend_utils``, which exists only inside Triton: nothing imports them here."""

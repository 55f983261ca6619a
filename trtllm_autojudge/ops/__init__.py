"""Bindings to the compiled acceptance core of ``plugins/`` (docs/design.md, "Layers").

- :mod:`.host_library`: ctypes binding of ``libautojudge_host.so``, the C++ host core
  (NumPy in, NumPy out; no torch needed).
- :mod:`.torch_ops`: ``torch.ops.autojudge.accept`` and ``torch.ops.autojudge.rewrite_logits``
  (host core on CPU tensors, CUDA kernels on CUDA tensors); importing it registers the ops.
- :mod:`.cuda_extension`: builds the CUDA binding with torch's extension tools (GPU hosts).
- :mod:`.plugin_build`: builds the libraries with CMake (``trtllm-autojudge build-plugin``);
- :mod:`.build`: finds them, or builds them on first use.
"""

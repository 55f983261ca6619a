"""Bindings to the compiled acceptance core of ``plugins/`` (docs/design.md, "Layers").

- :mod:`.host_library`: ctypes binding of ``libautojudge_host.so``, the C++ host core
  (NumPy in, NumPy out; no torch needed).
- :mod:`.torch_ops`: ``torch.ops.autojudge.accept`` and ``torch.ops.autojudge.rewrite_logits``
  (host core on CPU tensors, CUDA kernels on CUDA tensors); importing it registers the ops.
- :mod:`.cuda_extension`: builds the CUDA binding with torch's extension tools (GPU hosts).
- :mod:`.build`: finds or builds the libraries through ``build_scripts/build_plugin.py``.
"""

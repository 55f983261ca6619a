"""The acceptance rule as a specification in NumPy: accept mode (:mod:`.acceptance`) and the logits
mode's packed engine step (:mod:`.packed_step`). The C++ host core, the CUDA kernels and the TensorRT
plugin of ``plugins/`` implement it and are tested against it; their bindings
(:mod:`trtllm_autojudge.ops`) return its types. Nothing here imports the rest of the package."""

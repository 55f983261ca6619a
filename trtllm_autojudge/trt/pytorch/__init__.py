"""TensorRT-LLM's PyTorch backend: the judge rule in its draft-token processing (:mod:`.backend`, no
TensorRT-LLM needed) and the ``TorchSampler`` hooks that apply it in a process (:mod:`.sampler`)."""

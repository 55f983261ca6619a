"""Triton model repositories. Context route: :mod:`.config` (configs), :mod:`.tensors` (tensor
names shared with the Python models in ``models/``, which run inside Triton only). Stock route:
:mod:`.stock` (the stock ``tensorrt_llm_bls`` draft-target repository, no custom Python model).
EAGLE route: :mod:`.eagle` (the stock models over the EAGLE engine, ``decoding_mode "eagle"``).
:mod:`.pbtxt` writes ``config.pbtxt`` text."""

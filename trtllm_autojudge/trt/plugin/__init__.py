"""The AutoJudgeAccept plugin from Python: :mod:`.contract` (names, fields, input checks),
:mod:`.fields` (fields from a judge file), :mod:`.library` (loading the .so) and :mod:`.network`
(``add_plugin_v3`` insertion). The logits mode's packed-step rule, the reference of the host core and
kernels, is :mod:`trtllm_autojudge.spec.packed_step`. Nothing here imports TensorRT at import time."""

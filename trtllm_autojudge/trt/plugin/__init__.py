"""The AutoJudgeAccept plugin from Python: :mod:`.contract` (names, fields, input checks),
:mod:`.fields` (fields from a judge file), :mod:`.library` (loading the .so), :mod:`.network`
(``add_plugin_v3`` insertion) and :mod:`.packed_step` (the logits mode's packed-step rule, the
reference of the host core and kernels). Nothing here imports TensorRT at import time."""

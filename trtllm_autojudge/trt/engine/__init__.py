"""Engines: the model classes ``trtllm-build --model_cls_file`` loads (``target_model_cls.py``,
``stock_model_cls.py``, ``draft_model_cls.py``, ``eagle_model_cls.py``; they import TensorRT-LLM and
are loaded by ``trtllm-build`` only), their config blocks and I/O specs (:mod:`.io_spec`,
:mod:`.stock_spec`, :mod:`.draft_spec`, :mod:`.eagle_spec`; pure), the judge setups each route runs
(:mod:`.routes`) and the checkpoint conversions (:mod:`.convert`, :mod:`.eagle_convert`)."""

"""Loops that drive built engines. Context route: :mod:`.packing` (cycle inputs, chain trees),
:mod:`.drafts` / :mod:`.chain_drafter` (drafting on a draft engine), :mod:`.loop` (the loop),
:mod:`.reference_engine` (the engines' CPU specification). Stock route: :mod:`.stock_loop` (the
executor draft-target loop). EAGLE route: :mod:`.eagle_step` (one EAGLE engine step's inputs and outputs,
the runtime's packing), :mod:`.eagle_loop` (the executor's EAGLE decoding), :mod:`.eagle_engine` (the
engine's CPU specification). All: :mod:`.tp` / :mod:`.tp_pool` (tensor parallelism), and :mod:`.engines` (the TensorRT-LLM
engines the loops drive, and ``trtllm-autojudge run-engines``)."""

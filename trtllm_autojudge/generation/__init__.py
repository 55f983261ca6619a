"""Greedy generation outside the speculative loop: the regeneration requests label mining sends and
the backends that serve them (:mod:`.regeneration`, :mod:`.regen_transformers`, :mod:`.regen_trtllm`),
the looked-up windows they verify (:mod:`.prompt_lookup`), and batched greedy generation for training
data (:mod:`.batch_generate`). Mining (:mod:`trtllm_autojudge.mining`) builds on it; nothing here
imports mining."""

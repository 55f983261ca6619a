"""Models: what the speculative loop and mining need from a model (:mod:`.protocol`), its transformers
implementation (:mod:`.transformers_backend`), the compute dtype (:mod:`.dtype`), loading a
draft/target pair from command-line names (:mod:`.loading`), the embedded pair (:mod:`.embedded`,
:mod:`.embedded_draft`, :mod:`.lora`, :mod:`.vocab_subset`) and the pieces its training scripts share
(:mod:`.finetune`)."""

"""The decoding pair from command-line names (:func:`..models.loading.add_model_args`): the target
and its drafter, a draft model (:func:`..models.loading.load_pair`) or an EAGLE head (``--draft
eagle``: the task's shipped head for the tuned target; ``--draft eagle:HEAD``: a head directory or
file), an :class:`.eagle_drafter.EagleDrafter` that reads the target's hidden states.
"""
from __future__ import annotations

import argparse
from pathlib import Path

from ..models import loading as models
from ..models.eagle_head import load_eagle_head
from ..models.transformers_backend import TransformersLM
from ..models.vocab_subset import tokenizer_fingerprint
from .eagle_drafter import EagleDrafter


def is_eagle_draft(name: str) -> bool:
    """``--draft`` names an EAGLE head: the task's shipped one (``eagle``) or ``eagle:HEAD``."""
    return name == "eagle" or name.startswith("eagle:")


def load_pair(args: argparse.Namespace, task=None):
    """(target, draft, tokenizer): ``draft`` a draft model, or an :class:`.eagle_drafter.EagleDrafter`."""
    if not is_eagle_draft(args.draft):
        return models.load_pair(args, task)
    target, tokenizer = models.load_target_model(args, task)
    return target, load_eagle_drafter(args.draft, target, tokenizer, task), tokenizer


def load_eagle_drafter(name: str, target: TransformersLM, tokenizer, task) -> EagleDrafter:
    """The EAGLE drafter of ``--draft eagle`` / ``eagle:HEAD`` for a loaded ``target``, in its dtype (a
    head file that stores no embedding, as the shipped one, gets the target's)."""
    if name == "eagle":
        if task is None or task.shipped_eagle_head is None:
            raise SystemExit(f"--draft eagle: task {getattr(task, 'name', '?')} ships no EAGLE head: give --draft "
                             "eagle:HEAD (build_scripts/train_eagle.py)")
        path = task.shipped_model_path("eagle_head")
    else:
        path = Path(name.removeprefix("eagle:"))
    try:
        head = load_eagle_head(path, hidden_size=target.hidden_size, vocab_size=target.vocab_size,
                               tokenizer=tokenizer_fingerprint(tokenizer), dtype=target.dtype,
                               embedding=target.model.get_input_embeddings().weight.detach())
        return EagleDrafter(target, head)
    except (OSError, ValueError) as e:
        raise SystemExit(f"--draft {name}: {e}") from None

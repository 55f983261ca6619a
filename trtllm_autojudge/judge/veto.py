"""Token vetoes: classes of tokens a judge never accepts a mismatch on, whatever its score.

A mismatch swaps the target's token for the draft's. When either token belongs to a vetoed class,
the judge's verdict is not asked: the mismatch is rejected, as in lossless decoding. On the program
task, judged swaps of digits in comments ("5*47" written "5*5") are labelled harmless four times in
five, yet the target carries such a number into its code later in the response
(docs/results.md, "The certified operating point"); the ``digits`` veto keeps them out.

The vetoed token ids are stored in the judge file's metadata (``veto``: the classes, the
tokenizer's fingerprint and the ids), so decoding needs no tokenizer.
"""
from __future__ import annotations

import re
from typing import Callable

import numpy as np

# class name -> whether a token's text belongs to it
VETO_CLASSES: dict[str, Callable[[str], bool]] = {
    "digits": lambda text: bool(re.search(r"\d", text)),
}


def veto_token_ids(tokenizer, classes: list[str]) -> np.ndarray:  # [T] int64, increasing
    """Ids of the tokens whose text (the tokenizer's decoding of the token alone) is in any of ``classes``."""
    unknown = [c for c in classes if c not in VETO_CLASSES]
    if unknown or not classes:
        raise ValueError(f"veto classes {unknown or classes} are not known: choose from {sorted(VETO_CLASSES)}")
    size = len(tokenizer)
    texts = [tokenizer.decode([i]) for i in range(size)]
    return np.array([i for i, text in enumerate(texts) if any(VETO_CLASSES[c](text) for c in classes)], np.int64)


def veto_record(tokenizer, classes: list[str], fingerprint: str) -> dict:
    """The ``veto`` metadata of a judge file: classes, tokenizer fingerprint, token ids."""
    return {"classes": sorted(classes), "tokenizer": fingerprint,
            "token_ids": veto_token_ids(tokenizer, classes).tolist()}


def veto_table(record: dict | None, vocab_size: int) -> np.ndarray | None:  # [V] bool
    """The vetoed tokens of a judge file's ``veto`` record as a table over the vocabulary (None: no veto)."""
    if not record:
        return None
    ids = np.asarray(record["token_ids"], np.int64)
    if ids.size and (ids.min() < 0 or ids.max() >= vocab_size):
        raise ValueError(f"the judge's veto names token id {int(ids.max())}, outside the vocabulary [0, {vocab_size}): "
                         f"it was made for another tokenizer ({record.get('tokenizer')})")
    table = np.zeros(vocab_size, bool)
    table[ids] = True
    return table

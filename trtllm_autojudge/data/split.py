"""The fixed train / evaluation split of the 100 GSM-Symbolic templates (ids = file numbers).

Templates in ``TRAIN_TEMPLATES`` feed everything that learns from data: the target's adapter, the
draft, and judge label mining. ``EVAL_TEMPLATES`` never do; accuracy and speed are reported on
them. The evaluation ids were drawn once (``random.Random(3).sample`` of 28 ids, plus the two
templates whose variants cannot be generated, 24 and 95, whose original questions still serve for
evaluation) and are frozen here: changing them invalidates every shipped artefact.
"""
from __future__ import annotations

EVAL_TEMPLATES: tuple[int, ...] = (
    1, 8, 16, 19, 24, 25, 30, 31, 34, 48, 50, 51, 61, 67, 70, 71, 75, 76, 78, 81, 83, 84, 86, 87, 91, 92,
    93, 95, 97, 98,
)
TRAIN_TEMPLATES: tuple[int, ...] = tuple(i for i in range(100) if i not in EVAL_TEMPLATES)
SPLITS = ("train", "eval", "all")


def split_templates(split: str) -> tuple[int, ...]:
    """Template ids of ``split``: "train", "eval" or "all"."""
    if split == "train":
        return TRAIN_TEMPLATES
    if split == "eval":
        return EVAL_TEMPLATES
    if split == "all":
        return tuple(range(100))
    raise ValueError(f"unknown split {split!r}: use one of {SPLITS}")

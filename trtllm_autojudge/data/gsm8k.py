"""GSM8K problems by split: the original test questions and fresh template variants."""
from __future__ import annotations

import logging
from random import Random

from tqdm.auto import tqdm

from .problem import Problem
from .split import split_templates
from .templates import BROKEN_TEMPLATES, DEFAULT_MAX_DRAWS, Instance, load_replacements, load_templates

log = logging.getLogger(__name__)


def original_problems(split: str = "eval") -> list[Problem]:
    """The original GSM8K test questions of the split's templates, in template order."""
    templates = load_templates()
    return [templates[t].original() for t in split_templates(split)]


def variant_problems(split: str, per_template: int, seed: int = 0, max_draws: int = DEFAULT_MAX_DRAWS) -> list[Problem]:
    """``per_template`` distinct fresh instances of every template of the split (deterministic in ``seed``).

    Templates in :data:`.templates.BROKEN_TEMPLATES` are skipped with a logged reason. A template
    whose conditions reject ``max_draws`` draws in a row yields fewer instances (logged). The
    original question itself is never returned as a variant.
    """
    return [i.problem for i in variant_instances(split, per_template, seed, max_draws)]


def variant_instances(split: str, per_template: int, seed: int = 0, max_draws: int = DEFAULT_MAX_DRAWS,
                      skip: dict[int, str] | None = None, progress: str | None = None) -> list[Instance]:
    """:func:`variant_problems` with each variant's draw; templates in ``skip`` (id: reason) are left out too.
    ``progress``: the label of a progress bar over the templates (none when None)."""
    if per_template < 0:
        raise ValueError(f"per_template must be >= 0, got {per_template}")
    templates, replacements = load_templates(), load_replacements()
    instances = []
    for tid in tqdm(split_templates(split), desc=progress, unit="template", disable=progress is None, leave=False):
        reason = BROKEN_TEMPLATES.get(tid) or (skip or {}).get(tid)
        if reason:
            log.info("template %04d: no variants (%s)", tid, reason)
            continue
        template, rng = templates[tid], Random(seed * 1000 + tid)
        seen = {template.question}
        for _ in range(per_template * 4):  # duplicates are redrawn, a bounded number of times
            if len(seen) > per_template:
                break
            drawn = template.instance(rng, replacements, max_draws)
            if drawn is None:
                log.warning("template %04d: %d draws failed its conditions; stopping at %d variants",
                            tid, max_draws, len(seen) - 1)
                break
            if drawn.problem.question not in seen:
                seen.add(drawn.problem.question)
                instances.append(drawn)
        if len(seen) - 1 < per_template:
            log.warning("template %04d: only %d of %d variants", tid, len(seen) - 1, per_template)
    return instances

"""GSM8K problems by split: the original test questions and fresh template variants."""
from __future__ import annotations

import logging
from random import Random

from .problem import Problem
from .split import split_templates
from .templates import BROKEN_TEMPLATES, DEFAULT_MAX_DRAWS, load_replacements, load_templates

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
    if per_template < 0:
        raise ValueError(f"per_template must be >= 0, got {per_template}")
    templates, replacements = load_templates(), load_replacements()
    problems = []
    for tid in split_templates(split):
        if tid in BROKEN_TEMPLATES:
            log.info("template %04d: no variants (%s)", tid, BROKEN_TEMPLATES[tid])
            continue
        template, rng = templates[tid], Random(seed * 1000 + tid)
        seen = {template.question}
        for _ in range(per_template * 4):  # duplicates are redrawn, a bounded number of times
            if len(seen) > per_template:
                break
            problem = template.variant(rng, replacements, max_draws)
            if problem is None:
                log.warning("template %04d: %d draws failed its conditions; stopping at %d variants",
                            tid, max_draws, len(seen) - 1)
                break
            if problem.question not in seen:
                seen.add(problem.question)
                problems.append(problem)
        if len(seen) - 1 < per_template:
            log.warning("template %04d: only %d of %d variants", tid, len(seen) - 1, per_template)
    return problems

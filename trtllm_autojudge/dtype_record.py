"""Artefacts (label files, feature sets, judge files, adapters) record the compute dtype of the
models they were made with; using one with models in another dtype warns, naming both.

Kept free of torch: the judge file is part of the numpy-only core.
"""
from __future__ import annotations

import logging

log = logging.getLogger(__name__)
LEGACY_DTYPE = "float32"  # artefacts from before dtypes were recorded were all made in float32


def check_artifact_dtype(what: str, recorded: str | None, used: str) -> bool:
    """Warn when an artefact made in ``recorded`` is used in ``used``; True when they match.

    An artefact that records no dtype was made in float32 (:data:`LEGACY_DTYPE`).
    """
    recorded = recorded or LEGACY_DTYPE
    if recorded == used:
        return True
    native = " on hardware that computes bfloat16 natively" if recorded == "bfloat16" else ""
    log.warning("%s was made in %s and is used with models in %s: its numbers may shift slightly "
                "(remake it in %s, or run with --dtype %s%s)", what, recorded, used, used, recorded, native)
    return False

"""The certified ladder of a judge file: which threshold its certificate proves within an answer budget.

A certificate (``evaluation/certificate.py``, stored as a dict in the judge file's metadata under
``certificate``) holds its default threshold, certified within ``max_answer_change``, and, since
ladders, ``ladder``: per budget on the share of answers changed, the largest threshold certified
within it (``threshold`` None where none was). These functions read that dict, so every layer that
holds a judge file (the runtimes, the Triton BLS) picks a rung the same way.
"""
from __future__ import annotations

import math


def certified_rungs(certificate: dict) -> dict[float, float]:
    """{answer budget: the threshold certified within it} of a certificate's metadata."""
    rungs = {r["budget"]: r["threshold"] for r in certificate.get("ladder") or () if r["threshold"] is not None}
    return {certificate["max_answer_change"]: certificate["threshold"], **rungs}


def certified_window(certificate: dict) -> str:
    """The decoding a certificate holds for, in a few words."""
    window = f"K = {certificate['k']}" if certificate.get("tree") is None else f"tree {certificate['tree']}"
    return f"{certificate['task']}, {certificate['dtype']}, {window}, {certificate['max_new_tokens']} new tokens"


def threshold_within(certificate: dict, budget: float) -> float:
    """The threshold certified within ``budget``; ValueError saying what is certified when no rung is."""
    rungs = certified_rungs(certificate)
    match = next((b for b in rungs if math.isclose(b, budget, rel_tol=1e-9)), None)
    if match is None:
        listed = ", ".join(f"{b:g} (threshold {t:g})" for b, t in sorted(rungs.items()))
        failed = [r["budget"] for r in certificate.get("ladder") or () if r["threshold"] is None]
        tried = f"; no threshold was certified within {', '.join(f'{b:g}' for b in failed)}" if failed else ""
        raise ValueError(f"the judge's certificate ({certified_window(certificate)}) certifies the answer budgets "
                         f"{listed}, not {budget:g}{tried}: give one of those, or calibrate with --answer-budgets")
    return rungs[match]

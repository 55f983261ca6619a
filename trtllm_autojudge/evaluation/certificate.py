"""The answer-change certificate: how far a judge's default threshold is known to keep final answers.

A judge at threshold t changes the final answer of some unknown share p of a task's questions,
against lossless decoding (which IS the target's greedy answer). ``calibrate`` decodes n calibration
questions both ways and counts the CHANGED answers c. With c = 0 of 100 the one-sided 95% upper
confidence bound on p is still 3%, so an observed share is no promise. The certificate is the
bound, not the share.

Words used here and by ``calibrate``, ``eval`` and ``demo``:

changed
    A question whose final answer under the judge differs from lossless's.
gold loss
    A question lossless answers right and the judge wrong. Gold accuracy can only drop through gold
    losses (drop = losses - gains), so a bound on the loss share bounds the drop.
bound
    The one-sided Clopper-Pearson upper confidence bound at :data:`CONFIDENCE` on a share, from
    scipy (``binomtest(..., alternative="less").proportion_ci``).
budget
    The largest bound a user accepts (``calibrate --max-answer-change`` / ``--max-gold-drop``).
certified
    Both bounds within their budgets. For a 1% budget that takes at least 299 questions with no
    change (:func:`questions_needed`).

The certificate holds for fresh questions from the distribution the calibration questions were
drawn from, decoded as calibration decoded them (dtype, K, token budget, the same weights). It says
nothing about other templates or tasks: there a user calibrates on their own questions.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass, fields

from scipy.stats import binomtest

from ..data.question_set import check_record, describe
from ..judge.ladder import certified_rungs, certified_window, threshold_within

CONFIDENCE = 0.95


def rule_fields(judge_meta: dict) -> dict:
    """The rules of a judge file's verdicts that a certificate records: its token veto classes, its
    minimum run and its target-confidence gate (decoding/modes.py JudgeRule; None: none)."""
    return {"veto": judge_meta.get("veto", {}).get("classes", []), "min_run": judge_meta.get("min_run"),
            "min_target_prob": judge_meta.get("min_target_prob")}


def upper_bound(count: int, n: int, confidence: float = CONFIDENCE) -> float:
    """One-sided Clopper-Pearson upper bound on a share, from ``count`` events in ``n`` trials."""
    if n < 1 or not 0 <= count <= n:
        raise ValueError(f"upper_bound needs 0 <= count <= n and n >= 1, got count {count}, n {n}")
    return float(binomtest(count, n, alternative="less").proportion_ci(confidence_level=confidence).high)


def interval(count: int, n: int, confidence: float = CONFIDENCE) -> tuple[float, float]:
    """Two-sided Clopper-Pearson interval on a share, from ``count`` events in ``n`` trials."""
    if n < 1 or not 0 <= count <= n:
        raise ValueError(f"interval needs 0 <= count <= n and n >= 1, got count {count}, n {n}")
    ci = binomtest(count, n).proportion_ci(confidence_level=confidence)
    return float(ci.low), float(ci.high)


def most_allowed(n: int, budget: float, confidence: float = CONFIDENCE) -> int:
    """The largest count of events in ``n`` trials whose bound is within ``budget``; -1 when even
    none is (too few trials)."""
    count = -1
    while count < n and upper_bound(count + 1, n, confidence) <= budget:
        count += 1
    return count


def questions_needed(budget: float, confidence: float = CONFIDENCE, count: int = 0) -> int:
    """The fewest questions whose bound with ``count`` events is within ``budget`` (299 for 0 at 1%)."""
    if not 0.0 < budget < 1.0:
        raise ValueError(f"a budget is a share in (0, 1): no number of questions certifies {budget}")
    lo, hi = count + 1, 2 * (count + 1)
    while upper_bound(count, hi, confidence) > budget:
        lo, hi = hi, 2 * hi
    while lo < hi:  # the smallest n in [lo, hi] within the budget (the bound falls as n grows)
        mid = (lo + hi) // 2
        lo, hi = (mid + 1, hi) if upper_bound(count, mid, confidence) > budget else (lo, mid)
    return lo


def pair_fingerprint(target, draft) -> str:
    """The decoding pair as one string: both models' weight fingerprints (``TransformersLM.fingerprint``)."""
    return f"{target.fingerprint()}-{draft.fingerprint()}"


@dataclass(frozen=True)
class Certificate:
    """What ``calibrate`` proved of a judge's default threshold, and under which decoding settings.

    Stored in the judge file's metadata under ``certificate``; ``eval`` and ``demo`` print it and
    say whether it applies to their run (:meth:`mismatches`).
    """

    threshold: float
    max_judged: int | None  # judged acceptances allowed per response (None: no limit)
    questions: int
    question_set: dict  # how to regenerate the calibration questions, their count and digest (data/question_set.py)
    question_ids: list[str]  # their ids (a hash of each question's text): eval refuses to report on them
    answers_changed: int
    answer_change_bound: float
    max_answer_change: float
    gold_losses: int
    gold_drop_bound: float
    max_gold_drop: float
    confidence: float
    task: str
    dtype: str
    k: int | None  # chain drafts
    tree: str | None  # static trees (branching per depth)
    max_new_tokens: int
    pair: str  # pair_fingerprint of the models calibrated with
    veto: list[str]  # the judge's token veto classes (judge/veto.py; [] for none)
    min_run: int | None = None  # tokens a judged acceptance must open (decoding/modes.py JudgeRule; None: any)
    min_target_prob: float | None = None  # the target's least probability of its own token at a judged mismatch
    ladder: list[dict] | None = None  # per answer budget, the largest threshold certified within it (calibrate)

    def as_meta(self) -> dict:
        return asdict(self)

    @classmethod
    def from_meta(cls, meta: dict | None) -> "Certificate | None":
        """The certificate in a judge file's metadata, or None when it has none."""
        if not meta:
            return None
        names = {f.name for f in fields(cls)}
        missing = names - set(meta) - {"min_run", "min_target_prob", "ladder"}  # certificates made before these have none
        if missing:
            raise ValueError(f"the judge file's certificate lacks {sorted(missing)}: calibrate the judge again")
        try:
            check_record(meta["question_set"], meta["question_ids"])
        except ValueError as e:
            raise ValueError(f"the judge file's certificate: {e}") from None
        return cls(**{k: meta[k] for k in names if k in meta})

    def summary(self) -> str:
        """One line a user reads: what is certified, on what."""
        limit = "" if self.max_judged is None else f", at most {self.max_judged} judged acceptances per response"
        limit += f", {'/'.join(self.veto)} vetoed" if self.veto else ""
        limit += f", judged acceptances opening at least {self.min_run} tokens" if self.min_run else ""
        limit += (f", judged only where the target gave its token at least {self.min_target_prob:g}"
                  if self.min_target_prob else "")
        return (f"threshold {self.threshold:g}{limit}: answers changed <= {self.answer_change_bound:.2%} and gold drop "
                f"<= {self.gold_drop_bound:.2%} ({self.confidence:.0%} upper bounds; {self.answers_changed} changed and "
                f"{self.gold_losses} gold losses in {self.questions} calibration questions ({describe(self.question_set)}); budgets "
                f"{self.max_answer_change:g} / {self.max_gold_drop:g}; {self.where()}){self.ladder_line()}")

    def ladder_line(self) -> str:
        """The ladder's rungs as a user reads them ('' for a certificate without a ladder)."""
        if not self.ladder:
            return ""
        rungs = [f"{r['budget']:g} -> " + ("none" if r["threshold"] is None else
                                           f"{r['threshold']:g} ({r['vs_lossless']:.3f}x lossless)")
                 for r in self.ladder]
        return "; certified per answer budget (--answer-budget): " + ", ".join(rungs)

    def mismatches(self, *, task: str, dtype: str, k: int | None, tree: str | None, max_new_tokens: int,
                   pair: str | None, threshold: float, max_judged: int | None, veto: list[str],
                   min_run: int | None, min_target_prob: float | None) -> list[str]:
        """How a run differs from what was certified; empty when the certificate applies to it."""
        mine = {"task": task, "dtype": dtype, "k": k if tree is None else None, "tree": tree,
                "max_new_tokens": max_new_tokens, "threshold": threshold, "max_judged": max_judged, "veto": veto,
                "min_run": min_run, "min_target_prob": min_target_prob}
        if pair is not None:
            mine["pair"] = pair
        out = []
        for key, value in mine.items():
            certified = getattr(self, key)
            if key == "threshold":  # the default, or a rung of the ladder
                same = any(math.isclose(value, t, rel_tol=1e-12) for t in self.budgets().values())
            else:
                same = value == certified
            if not same:
                out.append(f"{key} {value} (certified: {certified})")
        return out

    def budgets(self) -> dict[float, float]:
        """{answer budget: the threshold certified within it}: the ladder's certified rungs, and the
        default threshold's own budget (a certificate made before ladders has only that one)."""
        return certified_rungs(self.as_meta())

    def threshold_for(self, budget: float) -> float:
        """The threshold certified within ``budget`` on the share of answers changed; ValueError saying
        what the certificate does certify when it holds no such rung (:mod:`..judge.ladder`)."""
        return threshold_within(self.as_meta(), budget)

    def where(self) -> str:
        """The decoding the certificate holds for, in a few words."""
        return certified_window(self.as_meta())

    def overlap(self, question_ids: list[str]) -> int:
        """How many of ``question_ids`` were calibration questions."""
        return len(set(question_ids) & set(self.question_ids))

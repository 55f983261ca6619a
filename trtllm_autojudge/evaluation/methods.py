"""Operating points of the evaluation: a method (how mismatches are relaxed) and its parameter.

Spec strings, used on the command line and in result files:
  lossless            exact matches only (== target greedy decoding)
  judge               AutoJudge at the judge file's own operating point (threshold and per-response limit)
  judge@T             AutoJudge at threshold T, no limit on judged acceptances
  judge@T,M           the same with at most M judged acceptances per response (the rest lossless)
  topk@K              draft token within the target's top-K
  typical@E,A         Medusa/EAGLE typical acceptance, posterior_threshold E and alpha A
  mtp@K,D             TensorRT-LLM MTP relaxed acceptance, top-K within delta D of top-1
  oracle              accept exactly the mismatches mined as unimportant on these prompts
"""
from __future__ import annotations

from dataclasses import dataclass

from ..decoding.modes import JudgeRule, MTPRelaxedRule, OracleRule, RelaxedRule, TopKRule, TypicalRule
from ..judge.head import JudgeHead

METHODS = ("lossless", "judge", "topk", "typical", "mtp", "oracle")


@dataclass(frozen=True)
class OperatingPoint:
    method: str
    params: tuple[float, ...] = ()

    @property
    def spec(self) -> str:
        return self.method if not self.params else f"{self.method}@{','.join(f'{p:g}' for p in self.params)}"

    @classmethod
    def parse(cls, spec: str) -> "OperatingPoint":
        method, _, rest = spec.partition("@")
        if method not in METHODS:
            raise ValueError(f"unknown method {method!r} in {spec!r}: use one of {METHODS}")
        try:
            params = tuple(float(x) for x in rest.split(",")) if rest else ()
        except ValueError:
            raise ValueError(f"parameters of {spec!r} must be numbers") from None
        need = {"lossless": (0,), "judge": (0, 1, 2), "topk": (1,), "typical": (2,), "mtp": (2,), "oracle": (0,)}[method]
        if len(params) not in need:
            raise ValueError(f"{method} takes {' or '.join(map(str, need))} parameter(s), got {spec!r}")
        if method == "judge" and len(params) == 2 and (params[1] < 0 or params[1] != int(params[1])):
            raise ValueError(f"judge@T,M: M is a number of judged acceptances per response (0, 1, 2, ...), got {spec!r}")
        return cls(method, params)

    @property
    def max_judged(self) -> int | None:
        """A judge point's limit on judged acceptances per response (None: none)."""
        return int(self.params[1]) if self.method == "judge" and len(self.params) == 2 else None

    def rule(self, judge: JudgeHead | None = None, unimportant=None) -> RelaxedRule | None:
        if self.method == "lossless":
            return None
        if self.method == "judge":
            if judge is None:
                raise ValueError("judge operating points need a judge file (--judge)")
            return JudgeRule(judge, self.params[0], self.max_judged) if self.params else JudgeRule.at_default(judge)
        if self.method == "topk":
            return TopKRule(int(self.params[0]))
        if self.method == "typical":
            return TypicalRule(*self.params)
        if self.method == "mtp":
            return MTPRelaxedRule(int(self.params[0]), self.params[1])
        if unimportant is None:
            raise ValueError("the oracle needs labels mined on the evaluation prompts (--oracle-labels or --mine-oracle)")
        return OracleRule(unimportant)


def judge_points(thresholds: list[float], max_judged: int | None) -> list[OperatingPoint]:
    """Judge points at ``thresholds``, each with the per-response limit ``max_judged`` (None: none)."""
    return [OperatingPoint("judge", (t,) if max_judged is None else (t, max_judged)) for t in thresholds]

"""Tokens per target forward become speed only through costs: the speed model of a speculative cycle.

A cycle at window K costs K draft steps and one target forward that verifies the K + 1 tokens, and
emits tau(K) tokens on average (the tokens per target forward that ``eval`` measures). A question
that emits n tokens first prefills its prompt (p_T on the target, p_D on the draft), then runs n / tau
cycles. With t_d the draft step, t_v(K) the verify forward and t_T the target's own one-token step::

    speculative tokens/s = n / (p_T + p_D + (n / tau) * (K * t_d + t_v(K)))
    target-only tokens/s = n / (p_T + (n - 1) * t_T)

Where a target forward costs the same whether it takes one token, K + 1 or a prompt (memory-bound,
and above all when its weights stream in from the host: offloading, TensorRT-LLM's weight
streaming), t_v = p_T = t_T, a draft prefill costs about a draft step, and with r = t_T / t_d, the
target forward counted in draft steps::

    speedup over target-only = n * r / (r + 1 + (n / tau) * (K + r))  ->  tau * r / (K + r) as n grows
    AutoJudge over lossless at the same K ~ tau_AJ / tau_LL     (the same cycle cost, whatever r)

As r grows the speedup tends to tau / (1 + tau / n): tokens per target forward become the speed, less
the prefill's one forward per question, which weighs more the fewer cycles a response takes (a
long window's). Every number this module takes is labelled where it comes from: ``measured`` (timed
on this machine, or counted by ``eval``) or ``modelled`` (computed from stated figures: bytes over a
bandwidth).
"""
from __future__ import annotations

import statistics
import time
from dataclasses import asdict, dataclass, field

import numpy as np


@dataclass(frozen=True)
class StepCosts:
    """Median seconds of the forwards a cycle is made of, measured on one machine after the same prefix."""
    draft_step_s: float  # one draft token
    target_step_s: float  # one target token (target-only decoding)
    verify_s: dict[int, float] = field(default_factory=dict)  # {K: one target forward over K + 1 tokens}
    prefill_target_s: float = 0.0  # one question's prompt on the target
    prefill_draft_s: float = 0.0  # and on the draft
    samples: int = 0  # timed forwards of each step kind behind the medians

    def as_dict(self) -> dict:
        return {**asdict(self), "verify_s": {str(k): v for k, v in self.verify_s.items()}}

    @classmethod
    def from_dict(cls, d: dict) -> StepCosts:
        return cls(d["draft_step_s"], d["target_step_s"], {int(k): v for k, v in d["verify_s"].items()},
                   d["prefill_target_s"], d["prefill_draft_s"], d["samples"])


PREFIX_TOKENS = 300  # the steps are timed after this many tokens: a program-task prompt and half a response


class StepCostSampler:
    """Times each question's prefill on both models, and a draft step, a target step and a verify of
    K + 1 tokens for each K of ``windows``, each after the same :data:`PREFIX_TOKENS`-token prefix
    and trimmed back to it after, a few at a time:
    ``bench`` samples between its questions, so the costs and the tokens/s they are checked against
    come from one window of time (this machine's speed drifts by more than 10% over minutes). The
    first round, untimed, warms up."""

    def __init__(self, target, draft, windows: list[int]):
        self.windows = sorted(windows)
        self.prefix = [3 + i % (target.vocab_size - 3) for i in range(PREFIX_TOKENS)]  # [P] ordinary token ids
        self.models = {"draft": draft, "target": target}
        self.sessions = {name: model.session() for name, model in self.models.items()}
        for session in self.sessions.values():
            session.forward(self.prefix)
        self.kinds = [("draft", 1), ("target", 1)] + [("target", k + 1) for k in self.windows]
        self.times: dict[tuple[str, int], list[float]] = {kind: [] for kind in self.kinds}
        self.prefills: dict[str, list[float]] = {name: [] for name in self.models}  # seconds per question
        self._round(timed=False)

    def _round(self, timed: bool) -> None:
        for name, n in self.kinds:
            t0 = time.perf_counter()
            self.sessions[name].forward([self.prefix[-1]] * n)
            if timed:
                self.times[(name, n)].append(time.perf_counter() - t0)
            self.sessions[name].retain(len(self.prefix))

    def sample(self, prompt_ids: list[int], repeats: int = 3) -> None:
        """The prefill of ``prompt_ids`` ([P] a question's prompt) on each model, then ``repeats`` timed
        forwards of each step kind, the kinds interleaved so drift hits them alike."""
        for name, model in self.models.items():
            session = model.session()
            t0 = time.perf_counter()
            session.forward(list(prompt_ids))
            self.prefills[name].append(time.perf_counter() - t0)
        for _ in range(repeats):
            self._round(timed=True)

    def costs(self) -> StepCosts:
        """The median of every sample so far."""
        if not self.times[("draft", 1)]:
            raise ValueError("no step was timed yet: call sample() first")
        med = {kind: statistics.median(v) for kind, v in self.times.items()}
        return StepCosts(med[("draft", 1)], med[("target", 1)], {k: med[("target", k + 1)] for k in self.windows},
                         statistics.median(self.prefills["target"]), statistics.median(self.prefills["draft"]),
                         samples=len(self.times[("draft", 1)]))


def predicted_tokens_per_s(tau: float, k: int, costs: StepCosts, tokens: float) -> float:
    """Speculative tokens/s of questions that emit ``tokens`` each, ``tau`` per cycle at window ``k``,
    from measured costs."""
    return tokens / (costs.prefill_target_s + costs.prefill_draft_s
                     + tokens / tau * (k * costs.draft_step_s + costs.verify_s[k]))


def predicted_target_only_tokens_per_s(costs: StepCosts, tokens: float) -> float:
    """Target-only tokens/s of questions that emit ``tokens`` each: the prefill gives the first."""
    return tokens / (costs.prefill_target_s + (tokens - 1) * costs.target_step_s)


def speedup_over_target(tau: np.ndarray | float, k: int, r: np.ndarray | float,
                        tokens: float | None = None) -> np.ndarray | float:
    """n r / (r + 1 + (n / tau)(K + r)): speculative over target-only when every target forward (a
    prefill too) costs r draft steps and a question emits n = ``tokens``; None: the limit of long
    responses, tau r / (K + r)."""
    if tokens is None:
        return tau * r / (k + r)
    return tokens * r / (r + 1 + tokens / tau * (k + r))


@dataclass(frozen=True)
class OffloadRegime:
    """A target forward whose weights stream in from the host: r = (weights / bandwidth) / draft step."""
    name: str
    weight_bytes: float  # the target's weights that cross the link each forward
    bandwidth_bytes_s: float  # host-to-device
    draft_step_s: float
    source: str  # where each figure comes from, each labelled measured or modelled

    @property
    def target_forward_s(self) -> float:
        return self.weight_bytes / self.bandwidth_bytes_s

    @property
    def r(self) -> float:
        return self.target_forward_s / self.draft_step_s


# Stated figures for the paper's pair (Llama-3.2-1B drafting for Llama-3.1-8B), every one modelled:
# 8.03e9 and 1.24e9 parameters (the models' cards) in bfloat16; PCIe 4.0 / 5.0 x16 carry 32 / 64
# GB/s raw per direction, taken here at about 80% (25 / 50 GB/s); the draft step at its weight-read
# floor on an H100 SXM (3.35 TB/s of HBM3), which real steps exceed (kernel launches), so r is an
# upper estimate of these regimes.
LLAMA_8B_BYTES, LLAMA_1B_BYTES, H100_HBM_BYTES_S = 8.03e9 * 2, 1.24e9 * 2, 3.35e12
OFFLOAD_REGIMES = (
    OffloadRegime("8B target streamed over PCIe 4.0, 1B draft on an H100", LLAMA_8B_BYTES, 25e9,
                  LLAMA_1B_BYTES / H100_HBM_BYTES_S,
                  "modelled: 16.06 GB of bf16 weights / 25 GB/s; draft step = 2.48 GB / 3.35 TB/s (its floor)"),
    OffloadRegime("8B target streamed over PCIe 5.0, 1B draft on an H100", LLAMA_8B_BYTES, 50e9,
                  LLAMA_1B_BYTES / H100_HBM_BYTES_S,
                  "modelled: 16.06 GB of bf16 weights / 50 GB/s; draft step = 2.48 GB / 3.35 TB/s (its floor)"),
)


def parse_offload(text: str) -> OffloadRegime:
    """``NAME:WEIGHT_GB:LINK_GB_S:DRAFT_MS`` (a regime of the user's, all figures modelled)."""
    try:
        name, gb, gb_s, ms = text.rsplit(":", 3)
        regime = OffloadRegime(name, float(gb) * 1e9, float(gb_s) * 1e9, float(ms) / 1e3,
                               f"modelled: {gb} GB / {gb_s} GB/s; draft step {ms} ms (given)")
    except ValueError:
        raise ValueError(f"--offload takes NAME:WEIGHT_GB:LINK_GB_S:DRAFT_MS, e.g. '70B over PCIe 5:141:50:3', "
                         f"got {text!r}") from None
    if min(regime.weight_bytes, regime.bandwidth_bytes_s, regime.draft_step_s) <= 0:
        raise ValueError(f"--offload {text!r}: the weights, bandwidth and draft step must be positive")
    return regime


def regime_table(taus: dict[int, dict[str, float]], r: float,
                 tokens: dict[int, dict[str, float]] | None = None) -> dict[str, dict]:
    """At one r, per window K and decoding: the speedup over target-only, and AutoJudge's over
    lossless at the same K and over the best lossless window. ``taus``: {K: {decoding: tau}};
    ``tokens``: {K: {decoding: tokens per question}} (None: long responses)."""
    speed = {k: {mode: float(speedup_over_target(tau, k, r, None if tokens is None else tokens[k][mode]))
                 for mode, tau in by_mode.items()}
             for k, by_mode in taus.items()}
    best_lossless = max((s["lossless"], k) for k, s in speed.items() if "lossless" in s)
    table = {}
    for k, s in speed.items():
        row = {f"{mode}_over_target_only": v for mode, v in s.items()}
        if "autojudge" in s and "lossless" in s:
            row["autojudge_over_lossless"] = s["autojudge"] / s["lossless"]
            row["autojudge_over_best_lossless_window"] = s["autojudge"] / best_lossless[0]
        table[str(k)] = row
    return {"r": r, "best_lossless_window": best_lossless[1], "windows": table}

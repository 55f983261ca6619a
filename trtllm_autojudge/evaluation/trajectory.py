"""The oracle's accepted tokens per target forward, replayed exactly on a mined trajectory.

A mined record's ``final_ids`` is the sequence the ORACLE decodes (the rule that accepts exactly
the mismatches mining labelled unimportant): at an unimportant label it keeps the draft's token,
at an important one the target's, and everywhere else the target's greedy token. Chain drafting
along it is therefore known from ONE teacher-forced draft pass over ``final_ids``: while a cycle's
draft tokens are accepted they ARE ``final_ids``, so the draft's next proposal is its argmax after
that prefix. Replaying the cycles over those proposals gives the oracle's tokens per target forward
exactly, with none of the numerics that make a live :class:`..decoding.modes.OracleRule` run leave
the mined sequence (after which it accepts nothing more). The lossless bound is replayed the same
way on the target's own response.

One difference from a live run, counted as ``bonus_swaps``: when a cycle accepts its whole window
and the next position holds a harmless draft token, the replay emits that token as the cycle's
extra (bonus) token, where live decoding would emit the target's own token. Both keep the answer
(the target's token is the one the mined sequence started from); the replay stays on the mined
sequence, and the live run continues on the target's response instead. Positions where the answer
was already fixed are not mined (no labels there): the replay verifies them exactly, as lossless
decoding would.

At a labelled position the draft's proposal is the label's draft token: what the draft proposed
there when it was mined. The replay's own teacher-forced pass can round a near-tie the other way in
bfloat16 (other chunks of the same sequence through the KV cache); such positions are counted as
``flips``.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from ..mining.cached_lm import CachedLM
from ..models.protocol import LanguageModel


@dataclass
class Replay:
    new_tokens: int
    cycles: int
    accepted: int  # draft tokens accepted (the correction/bonus tokens excluded)
    judged: int  # accepted mismatches (unimportant labels)
    bonus_swaps: list[int]  # positions whose bonus token is a harmless draft token (see the module docstring)
    flips: int = 0  # labelled positions where the replay's draft pass disagreed with the mined draft token

    @property
    def tokens_per_cycle(self) -> float:
        return self.new_tokens / max(self.cycles, 1)


def replay_chain(
    sequence: Sequence[int],  # [L] the decoded trajectory, prompt included
    start: int,  # number of prompt tokens
    proposals: Sequence[int],  # [L] proposals[i]: the draft's argmax after sequence[:i] (i >= start)
    target_next: Sequence[int],  # [L] target_next[i]: the target's greedy token after sequence[:i]
    harmless: dict[int, set[int]],  # position -> draft tokens the rule lets through there
    k: int,  # draft tokens per cycle
) -> Replay:
    """Chain speculative decoding replayed along ``sequence``; every emitted token is ``sequence``'s."""
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    p, cycles, accepted, judged, bonus_swaps = start, 0, 0, 0, []
    while p < len(sequence):
        j = 0
        while j < k and p + j < len(sequence):
            i, d = p + j, int(proposals[p + j])
            if d == target_next[i]:
                pass
            elif d in harmless.get(i, ()):
                judged += 1
            else:
                break
            if d != sequence[i]:
                raise ValueError(f"position {i}: an accepted draft token {d} differs from the trajectory's {sequence[i]}: "
                                 "the proposals or labels do not belong to this sequence")
            j += 1
        cycles += 1
        accepted += j
        if j == k and p + j < len(sequence) and sequence[p + j] != target_next[p + j]:
            bonus_swaps.append(p + j)
        p += j + 1  # the accepted tokens, then one correction (or bonus) token
    return Replay(len(sequence) - start, cycles, accepted, judged, bonus_swaps)


def record_replays(record: dict, draft: LanguageModel, k: int, draft_lm: CachedLM | None = None) -> dict[str, Replay]:
    """``oracle`` on the record's ``final_ids`` and ``lossless`` on the target's own response.

    ``record`` is a mined record (:mod:`..mining.store`); two teacher-forced draft passes (on the
    oracle's, the labels' draft tokens where they were mined: see the module docstring).
    """
    draft_lm = draft_lm or CachedLM(draft)
    prompt = list(record["prompt_ids"])
    n = len(prompt)
    out = {}
    for name, seq in (("lossless", prompt + list(record["response_ids"])), ("oracle", list(record["final_ids"]))):
        target_next, harmless, flips = list(seq), {}, 0
        preds = draft_lm.predictions(seq[:-1]) if len(seq) > n else []  # preds[j]: after seq[:j + 1]
        proposals = [0] + list(preds)  # proposals[i] = preds[i - 1]
        if name == "oracle":
            for pos, important, target_token, draft_token in record["labels"]:
                pos, draft_token = int(pos), int(draft_token)
                flips += proposals[pos] != draft_token
                proposals[pos] = draft_token
                if not important:
                    target_next[pos] = int(target_token)
                    harmless[pos] = {draft_token}
        out[name] = replay_chain(seq, n, proposals, target_next, harmless, k)
        out[name].flips = flips
    return out


def live_divergence(tokens: Sequence[int], record: dict) -> int | None:
    """Response position where a live run's ``tokens`` leave the record's ``final_ids`` (None: they do not)."""
    mined = list(record["final_ids"])[len(record["prompt_ids"]):]
    for i, (a, b) in enumerate(zip(tokens, mined)):
        if a != b:
            return i
    return None if len(tokens) == len(mined) else min(len(tokens), len(mined))


def trajectory_row(records: Sequence[dict], draft: LanguageModel, k: int, lossless_row: dict | None) -> dict:
    """The ``oracle-trajectory`` summary row (the columns of :data:`.runner.SUMMARY_COLUMNS`).

    Agreement is 1 by construction (the mined sequence keeps the target's answer: no answer changed,
    a bound of 0), so gold accuracy and its interval are the lossless run's; there is no wall clock
    (``tokens_per_s`` is NaN).
    """
    draft_lm = CachedLM(draft)
    replays = [record_replays(r, draft, k, draft_lm)["oracle"] for r in records]
    cycles, accepted = sum(r.cycles for r in replays), sum(r.accepted for r in replays)
    new_tokens = sum(r.new_tokens for r in replays)
    rate = new_tokens / max(cycles, 1)
    return {
        "spec": "oracle-trajectory", "method": "oracle", "params": "", "questions": len(replays),
        "tokens_per_cycle": rate,
        "accepted_per_cycle": accepted / max(cycles, 1),
        "agreement": 1.0,
        "gold_accuracy": lossless_row["gold_accuracy"] if lossless_row else float("nan"),
        "tokens_per_s": float("nan"),
        "judged_fraction": sum(r.judged for r in replays) / max(accepted, 1),
        "new_tokens": new_tokens, "cycles": cycles,
        # against the lossless row's pooled rate; no interval (the replay is not paired by question here)
        "vs_lossless": rate / lossless_row["tokens_per_cycle"] if lossless_row else float("nan"),
        "vs_lossless_lo": float("nan"), "vs_lossless_hi": float("nan"),
        "agreement_lo": 1.0, "agreement_hi": 1.0,
        **{k: lossless_row[k] if lossless_row else float("nan") for k in ("gold_accuracy_lo", "gold_accuracy_hi")},
        "answers_changed": 0, "answer_change_bound": 0.0, "gold_losses": 0, "gold_drop_bound": 0.0,
        "changed_without_acceptance": 0,
    }

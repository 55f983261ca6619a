"""Random packed TensorRT-LLM 1.2 steps, laid out as ``runtimeBuffers.cpp`` (``setFromInputs``) lays
them out, for the logits-mode tests (tests/test_host_core.py) and the GPU check (tests/gpu).

Per step, context requests first, then generation sequences:
- a first or middle context chunk: ``chunk`` tokens, one row (its last token), no drafts;
- a last context chunk with K drafts (K may be 0): ``chunk + K`` tokens, rows at its last 1 + K tokens;
- a generation request with W beams: W sequences of one token and one row each.
``corrupt`` breaks it the ways the plugin must refuse without reading out of bounds: a generation
sequence that carries drafts, a misplaced or missing row, garbage positions, negative lengths,
unknown request types.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

CONTEXT, GENERATION = 0, 1


@dataclass
class Step:
    input_ids: np.ndarray  # [T] int32
    last_token_ids: np.ndarray  # [L] int32, 1-based
    request_types: np.ndarray  # [S] int32
    host_context_lengths: np.ndarray  # [S] int32
    first_row: np.ndarray  # [S] int32: the layout generated (valid only when not corrupted)
    num_drafts: np.ndarray  # [S] int32
    corrupted: str = ""  # what was broken, "" for a well-formed step
    kinds: list[str] = field(default_factory=list)  # per sequence: first/middle chunk, last chunk, beam


def random_step(rng: np.random.Generator, vocab: int, max_drafts: int = 8, max_chunk: int = 6,
                contexts: int | None = None, generations: int | None = None) -> Step:
    """A well-formed step: ``contexts`` context requests (random 0-4 when None), then ``generations``
    generation requests (random 0-3) of 1-3 beams."""
    ids, rows, types, lengths, firsts, drafts, kinds = [], [], [], [], [], [], []
    for _ in range(int(rng.integers(0, 5)) if contexts is None else contexts):  # context requests
        chunk = int(rng.integers(1, max_chunk + 1))
        last = rng.random() < 0.7
        k = int(rng.integers(0, max_drafts + 1)) if last else 0
        start = len(ids)
        ids += rng.integers(0, vocab, size=chunk + k).tolist()
        firsts.append(len(rows))
        rows += [start + chunk + j for j in range(k + 1)]
        types.append(CONTEXT)
        lengths.append(chunk + k)
        drafts.append(k)
        kinds.append("last chunk" if last else "first/middle chunk")
    for _ in range(int(rng.integers(0, 4)) if generations is None else generations):  # W beams each
        for _ in range(int(rng.integers(1, 4))):
            ids.append(int(rng.integers(0, vocab)))
            firsts.append(len(rows))
            rows.append(len(ids))
            types.append(GENERATION)
            lengths.append(int(rng.integers(1, 50)))  # prompt + drafts in TensorRT-LLM; not a token count here
            drafts.append(0)
            kinds.append("beam")
    if not types:
        return random_step(rng, vocab, max_drafts, max_chunk, contexts, generations)
    return Step(np.array(ids, np.int32), np.array(rows, np.int32), np.array(types, np.int32),
                np.array(lengths, np.int32), np.array(firsts, np.int32), np.array(drafts, np.int32), kinds=kinds)


def corrupt(step: Step, rng: np.random.Generator, vocab: int) -> Step:
    """One random kind of breakage (the returned step's ``corrupted`` says which)."""
    ids, rows = step.input_ids.tolist(), step.last_token_ids.tolist()
    types, lengths = step.request_types.copy(), step.host_context_lengths.copy()
    kind = rng.choice(["generation with drafts", "misplaced row", "missing row", "garbage rows", "negative length",
                       "unknown type", "extra row"])
    if kind == "generation with drafts":  # what a non-terminating draft-target request would look like
        k = int(rng.integers(1, 4))
        ids += rng.integers(0, vocab, size=1 + k).tolist()
        rows += [len(ids) - k + j for j in range(k + 1)]
        types = np.append(types, GENERATION)
        lengths = np.append(lengths, 10)
    elif kind == "misplaced row" and rows:
        r = int(rng.integers(len(rows)))
        rows[r] += int(rng.choice([-1, 1]))
    elif kind == "missing row" and rows:
        del rows[int(rng.integers(len(rows)))]
    elif kind == "garbage rows":
        rows = rng.integers(-3, len(ids) + 4, size=len(rows) + int(rng.integers(-1, 2))).tolist()
    elif kind == "negative length":
        ctx = np.flatnonzero(types == CONTEXT)
        if len(ctx):
            lengths[int(rng.choice(ctx))] = -int(rng.integers(1, 5))
    elif kind == "unknown type":
        types[int(rng.integers(len(types)))] = 7
    elif kind == "extra row":
        rows.insert(int(rng.integers(len(rows) + 1)), int(rng.integers(1, len(ids) + 1)))
    return Step(np.array(ids, np.int32), np.array(rows, np.int32), types.astype(np.int32), lengths.astype(np.int32),
                step.first_row, step.num_drafts, corrupted=str(kind), kinds=step.kinds)


def steer_drafts(step: Step, target_argmax: np.ndarray, rng: np.random.Generator, share: float = 0.6) -> None:
    """Make draft tokens equal their parent row's target argmax with probability ``share`` (long
    exact-match prefixes), in place."""
    for first, k in zip(step.first_row.tolist(), step.num_drafts.tolist()):
        for j in range(1, k + 1):
            if rng.random() < share:
                step.input_ids[step.last_token_ids[first + j] - 1] = target_argmax[first + j - 1]

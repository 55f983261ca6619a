"""One packed TensorRT-LLM 1.2 engine step as the AutoJudgeAccept logits mode reads it, and the rule
that rewrites its logits: the Python reference of ``plugins/include/autojudge/accept_core.h`` (the
host core and the CUDA kernel run that header; ``tests/test_host_core.py`` compares them).

Words. A *sequence* is one entry of ``host_request_types`` (a context request, or one beam of a
generation request). The step's ``input_ids [T]`` hold the sequences' tokens back to back; its
logits have one row per entry of ``last_token_ids [L]`` (1-based positions in ``input_ids``,
ascending), and the LM head's input rows (the final-norm hidden states there: the DT feature) have
the same rows. How TensorRT-LLM 1.2 fills them (``batch_manager/runtimeBuffers.cpp``,
``setFromInputs``): a context request's chunk, followed on its last chunk by its K draft tokens,
with ``host_context_lengths = chunk + K`` and the rows ``[chunk end, 1 x K]``; a generation
sequence's last token, one row.

The rule, per sequence s:

1. tokens: ``host_context_lengths[s]`` for a context request, else 1 (the split TensorRT-LLM's LoRA
   plugin uses); they must add up to T, or the whole step is refused (:class:`StepMismatch`);
2. rows: the rows whose ``last_token_ids`` fall in its token range; K = rows - 1;
3. the rows must be the sequence's LAST 1 + K tokens (root, then K drafts), else the sequence is
   refused (``num_drafts = REFUSED``) and its rows are copied unchanged;
4. draft token k = ``input_ids[last_token_ids[root + k] - 1]``, its judge logit is the one of row
   ``root + k``; when it is in the vocabulary, mismatches the argmax of row ``root + k - 1`` and
   passes the judge, that parent row's entry for it becomes the next value above the row's maximum.

An exact-match decoder on the rewritten logits then accepts exactly the judge-approved prefix.
"""
from __future__ import annotations

import numpy as np

CONTEXT_REQUEST = 0  # runtime::RequestType::kCONTEXT
GENERATION_REQUEST = 1  # runtime::RequestType::kGENERATION
REFUSED = -1  # num_drafts of a sequence whose rows do not match its tokens


class StepMismatch(ValueError):
    """The sequences' tokens do not add up to the step's ``input_ids``."""


def sequence_tokens(request_types: np.ndarray, host_context_lengths: np.ndarray) -> np.ndarray:
    """[S] int64: packed input tokens of each sequence (context: its context length; other: 1)."""
    types = np.asarray(request_types, np.int64).reshape(-1)
    lengths = np.asarray(host_context_lengths, np.int64).reshape(-1)
    if types.shape != lengths.shape:
        raise ValueError(f"host_request_types {types.shape} and host_context_lengths {lengths.shape} must both be [S]")
    return np.where(types == CONTEXT_REQUEST, np.maximum(lengths, 0), 1)


def first_row_after(last_token_ids: np.ndarray, position: int) -> int:
    """The first row whose token lies after ``position``, by binary search (for ascending
    ``last_token_ids [L]``; on any other input the same probes as the core, so the same answer)."""
    low, high = 0, len(last_token_ids)
    while low < high:
        middle = low + (high - low) // 2
        if last_token_ids[middle] <= position:
            low = middle + 1
        else:
            high = middle
    return low


def segment_step(
    last_token_ids: np.ndarray,  # [L] int, 1-based positions in input_ids
    num_tokens: int,  # T
    request_types: np.ndarray,  # [S] int
    host_context_lengths: np.ndarray,  # [S] int
) -> tuple[np.ndarray, np.ndarray]:
    """``(first_row [S], num_drafts [S])``: each sequence's root row and K, or K = :data:`REFUSED`.

    Raises :class:`StepMismatch` when the sequences' tokens do not add up to ``num_tokens``.
    """
    rows = np.asarray(last_token_ids, np.int64).reshape(-1)
    tokens = sequence_tokens(request_types, host_context_lengths)
    ends = np.cumsum(tokens)
    total = int(ends[-1]) if len(ends) else 0
    if total != num_tokens:
        raise StepMismatch(f"the sequences hold {total} tokens by host_request_types and host_context_lengths, "
                           f"input_ids has {num_tokens}")
    first_row = np.zeros(len(tokens), np.int32)
    num_drafts = np.full(len(tokens), REFUSED, np.int32)
    start = 0
    for s, end in enumerate(ends.tolist()):
        first, stop = first_row_after(rows, start), first_row_after(rows, end)
        first_row[s] = first
        k = stop - first - 1
        if 0 <= k < end - start and np.array_equal(rows[first:stop], np.arange(end - k, end + 1)):
            num_drafts[s] = k
        start = end
    return first_row, num_drafts


def next_above(bits: int, dtype: np.dtype) -> int | None:
    """Bits of the smallest value of ``dtype`` strictly above the value with these bits; None when
    no finite one exists (NaN, +-inf, the largest finite value). ``uint16`` means bfloat16 bits."""
    dtype = np.dtype(dtype)
    if dtype == np.uint16:  # bfloat16: the top half of a float32
        value = np.array([bits << 16], np.uint32).view(np.float32)[0]
        if not np.isfinite(value):
            return None
        magnitude, negative = bits & 0x7FFF, bits & 0x8000
        candidate = 1 if magnitude == 0 else (bits - 1 if negative else bits + 1)
        return candidate if np.isfinite(np.array([candidate << 16], np.uint32).view(np.float32)[0]) else None
    unsigned = np.uint32 if dtype == np.float32 else np.uint16
    value = np.array([bits], unsigned).view(dtype)[0]
    if not np.isfinite(value):
        return None
    with np.errstate(over="ignore"):  # the largest finite value steps to inf: refused below
        above = np.nextafter(value, dtype.type(np.inf))
    return int(np.array([above], dtype).view(unsigned)[0]) if np.isfinite(above) else None


def rewrite_logits(
    target_logits: np.ndarray,  # [L, V] float32 / float16 / bfloat16 bits as uint16
    target_argmax: np.ndarray,  # [L] int: argmax of each row
    judge_logit: np.ndarray,  # [L] float: judge logit of each row's token (its LM-head input row)
    input_ids: np.ndarray,  # [T] int
    last_token_ids: np.ndarray,  # [L] int
    request_types: np.ndarray,  # [S] int
    host_context_lengths: np.ndarray,  # [S] int
    threshold: float,
) -> np.ndarray:
    """[L, V] the rewritten logits (module docstring, steps 1-4); same dtype as ``target_logits``."""
    logits = np.ascontiguousarray(target_logits)
    L, V = logits.shape
    input_ids = np.asarray(input_ids, np.int64).reshape(-1)
    rows = np.asarray(last_token_ids, np.int64).reshape(-1)
    first_row, num_drafts = segment_step(rows, len(input_ids), request_types, host_context_lengths)
    unsigned = np.uint32 if logits.dtype == np.float32 else np.uint16
    out = logits.copy()
    bits = out.view(unsigned)
    with np.errstate(divide="ignore"):
        cut = np.log(np.float64(threshold)) - np.log1p(-np.float64(threshold))
    for root, k in zip(first_row.tolist(), num_drafts.tolist()):
        for child in range(root + 1, root + k + 1):
            parent = child - 1
            draft = int(input_ids[rows[child] - 1])
            argmax = int(target_argmax[parent])
            logit = np.float64(judge_logit[child])
            judged = np.isfinite(logit) and logit < cut
            if not (0 <= draft < V and 0 <= argmax < V and draft != argmax and judged):
                continue
            above = next_above(int(logits.view(unsigned)[parent, argmax]), logits.dtype)
            if above is not None:
                bits[parent, draft] = above
    return out

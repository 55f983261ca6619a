"""The judge's feature blocks that exist while decoding, as one vocabulary for the Python rule
(:mod:`trtllm_autojudge.judge.head`, :mod:`trtllm_autojudge.judge.lookahead`) and the compiled core
(``plugins/include/autojudge/accept_core.h``, ``FeatureBlock``): the host core, the CUDA kernels and
the ``feature_blocks`` field of the TensorRT plugin. ``tests/test_host_core_lookahead.py`` holds
the C++ table equal to this one (names, codes, draft tokens needed after the node) and the six
lookahead scores equal, in order, to :func:`trtllm_autojudge.judge.lookahead.lookahead_scores`.

A node n's blocks, with c1 its greedy child (the node carrying the draft's greedy token after n)
and c2 c1's greedy child:

  code  block  features                                                         width
  0     DT     the target's hidden state with n's token as the input            Ht
  1     DD     the draft's hidden state there                                    Hd
  2     DT1    the target's hidden state at c1                                   Ht
  3     DT2    the target's hidden state at c2                                   Ht
  4     DD1    the draft's hidden state at c1                                    Hd
  5     LS     LOOKAHEAD_SCORES, from the target's logits after n and after c1   6

A judge's weights are its blocks' features in the order of its setup (``DD-DT-LS``: [Hd | Ht | 6]).
"""
from __future__ import annotations

import numpy as np

BLOCK_CODES = {"DT": 0, "DD": 1, "DT1": 2, "DT2": 3, "DD1": 4, "LS": 5}
# Draft tokens a node needs after it for a block (a node without them has no verdict: rejected).
# DD1 needs two: the draft computes its hidden state at c1 only when it drafts c2 after it.
WINDOW_TOKENS_AFTER = {"DT1": 1, "DD1": 2, "DT2": 2, "LS": 2}
# The LS block, in this order: log p0(c1) and log p1(c2) (p0: the target's distribution after n, p1:
# after c1; floored at MIN_LOG_PROB), whether c1 / c2 is that distribution's argmax (1.0 or 0.0),
# and the entropies of p0 and p1.
LOOKAHEAD_SCORES = ("log_p0_c1", "log_p1_c2", "c1_is_argmax_p0", "c2_is_argmax_p1", "entropy_p0", "entropy_p1")
MIN_LOG_PROB = -30.0  # log-probabilities below this are floored (a feature scaler needs finite values)
DRAFT_BLOCKS = ("DD", "DD1")  # the blocks that read the draft's hidden states


def block_codes(setup: str) -> np.ndarray:  # [K] int32: the codes of a '-'-joined setup, in its order
    blocks = setup.split("-")
    unknown = [b for b in blocks if b not in BLOCK_CODES]
    if unknown or len(set(blocks)) != len(blocks):
        raise ValueError(f"feature setup {setup!r} is not a '-'-joined list of distinct blocks from {list(BLOCK_CODES)}"
                         + (f" ({unknown} exist only offline)" if unknown else ""))
    return np.array([BLOCK_CODES[b] for b in blocks], np.int32)


def block_setup(codes) -> str:
    """The setup of block codes ([K] int): the inverse of :func:`block_codes`."""
    names = {code: name for name, code in BLOCK_CODES.items()}
    codes = [int(c) for c in np.asarray(codes).reshape(-1)]
    unknown = [c for c in codes if c not in names]
    if not codes or unknown or len(set(codes)) != len(codes):
        raise ValueError(f"feature block codes {codes} must be distinct codes from {BLOCK_CODES}")
    return "-".join(names[c] for c in codes)


def reads_draft(setup: str) -> bool:
    """Whether a setup reads the draft's hidden states (its kernels take ``draft_hidden``)."""
    return any(b in DRAFT_BLOCKS for b in setup.split("-"))


def window_tokens(setup: str) -> int:
    """Draft tokens a node needs after it for a verdict under a setup (0: no lookahead block; the
    kernels then take no ``greedy_child``)."""
    return max((WINDOW_TOKENS_AFTER.get(b, 0) for b in setup.split("-")), default=0)


def feature_size(setup: str, target_hidden: int, draft_hidden: int) -> int:
    """F, the length of the weights of a setup of these blocks."""
    widths = {"LS": len(LOOKAHEAD_SCORES), **{b: draft_hidden for b in DRAFT_BLOCKS}}
    block_codes(setup)  # a setup of the compiled blocks
    return sum(widths.get(b, target_hidden) for b in setup.split("-"))

"""Tensor parallelism: why every rank makes the same acceptance decision, and a check that it does.

With ``--tp_size N`` each of the N MPI ranks runs the same engine on its shard of the weights.
The decision needs two things per node, and both are REPLICATED on every rank:

- the final-norm hidden state (the DT feature): every attention/MLP block ends in a row-parallel
  linear followed by an all-reduce, so the residual stream, and the final RMSNorm of it, is the
  same full-width tensor on every rank;
- the logits: the LM head is column-parallel with ``gather_output=True`` (an all-gather), so every
  rank holds all vocabulary columns.

The draft tokens, paths, lengths and thresholds are host inputs the runner gives to all ranks
(it broadcasts the draft's proposal from rank 0, where ``ModelRunnerCpp`` returns it). The
plugin is a deterministic function of those replicated tensors, so all ranks compute the same
accepted tokens; no extra communication is needed. The all-reduce/all-gather results are
identical across ranks (NCCL delivers one result to all), which is what makes the inputs equal
bit for bit; :func:`check_rank_agreement` verifies it at run time when asked.
"""
from __future__ import annotations

import numpy as np

from ...spec.acceptance import Acceptance


def acceptance_digest(acc: Acceptance) -> tuple:
    """A comparable, picklable summary of one cycle's decision."""
    return (acc.accepted_len.tolist(), acc.best_path.tolist(), acc.accepted_tokens.tolist(), acc.judged_count.tolist())


def check_rank_agreement(comm, acc: Acceptance) -> None:
    """Raise RuntimeError if any rank of ``comm`` (an mpi4py communicator) decided differently."""
    digests = comm.allgather(acceptance_digest(acc))
    bad = [r for r, d in enumerate(digests) if d != digests[0]]
    if bad:
        raise RuntimeError(f"tensor-parallel ranks {bad} accepted differently from rank 0: "
                           f"rank 0 {digests[0]}, rank {bad[0]} {digests[bad[0]]}. The engine's hidden states or "
                           f"logits are not replicated: check that all ranks run the same engine build")


def same_on_all_ranks(comm, array: np.ndarray) -> bool:
    """True when ``array`` is bitwise identical on every rank of ``comm``."""
    data = np.ascontiguousarray(array).tobytes()
    return all(d == data for d in comm.allgather(data))

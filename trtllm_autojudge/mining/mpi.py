"""MPI sharding of prompts: ``mpirun -n R trtllm-autojudge mine ...``.

Rank r mines the prompts with ``index % R == r`` into its own shard file; when every rank is done,
rank 0 merges the shards into the output in prompt order. A rank that dies leaves its shard valid
up to its last complete record, and a rerun (same R) resumes every shard; a prompt found in any
rank's shard is not mined again, even when the rerun orders the prompts anew.
Open MPI as root needs ``--allow-run-as-root``; more ranks than cores need ``--oversubscribe``.
"""
from __future__ import annotations

import os
from pathlib import Path

MPI_ENV = ("OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK", "MPI_LOCALNRANKS")


def world():
    """(rank, size, comm); (0, 1, None) outside mpirun, without importing mpi4py."""
    if not any(v in os.environ for v in MPI_ENV):
        return 0, 1, None
    try:
        from mpi4py import MPI
    except ImportError as e:
        raise RuntimeError("running under mpirun needs mpi4py: pip install 'trtllm-autojudge[mpi]'") from e
    comm = MPI.COMM_WORLD
    return comm.Get_rank(), comm.Get_size(), comm


def shard_path(out: str | Path, rank: int, size: int) -> Path:
    out = Path(out)
    return out.with_name(f"{out.name}.rank{rank}-of-{size}")

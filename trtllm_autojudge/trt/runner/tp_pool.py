"""Orchestrator mode: one process drives a tensor-parallel target engine on N spawned MPI ranks.

A server process (Triton's Python model, or any single process) cannot be one of the N ranks an
engine built with ``--tp_size N`` needs. :class:`SpawnedTargetPool` spawns them with
``MPI.COMM_SELF.Spawn`` (as TensorRT-LLM's own orchestrator mode spawns executor workers), sends
each :class:`.packing.PackedCycle` to all of them, and gets the decision back from rank 0. Every
worker builds its verifier with the same factory; with ``check_ranks`` they compare decisions each
cycle (:func:`.tp.check_rank_agreement`). Spawning needs an MPI runtime around the parent: start
it under ``mpirun -n 1`` (Open MPI refuses to spawn from a singleton).

Worker entry point: ``python -m trtllm_autojudge.trt.runner.tp_pool --factory MODULE_OR_FILE:FUNCTION
--kwargs JSON``; ``FUNCTION(rank=..., **kwargs)`` returns the rank's verifier.
"""
from __future__ import annotations

import argparse
import importlib
import importlib.util
import json
import sys
from pathlib import Path

from ...spec.acceptance import Acceptance
from .packing import PackedCycle
from .tp import check_rank_agreement


def load_factory(spec: str):
    """``package.module:function`` or ``path/to/file.py:function``."""
    target, _, name = spec.rpartition(":")
    if not target or not name:
        raise ValueError(f"factory {spec!r} must look like 'package.module:function' or 'file.py:function'")
    if target.endswith(".py"):
        module_spec = importlib.util.spec_from_file_location(Path(target).stem, target)
        module = importlib.util.module_from_spec(module_spec)
        module_spec.loader.exec_module(module)
    else:
        module = importlib.import_module(target)
    return getattr(module, name)


def engine_verifier(rank: int, engine_dir: str, gpu_weights_percent: float = 1.0):
    """Factory for the AutoJudge target engine (TensorRT-LLM 1.2, GPU ranks)."""
    from .engines import EngineTargetVerifier

    return EngineTargetVerifier(engine_dir, rank=rank, gpu_weights_percent=gpu_weights_percent)


class SpawnedTargetPool:
    """A :class:`.loop.Verifier` backed by ``n_ranks`` spawned worker processes."""

    def __init__(self, n_ranks: int, factory: str, kwargs: dict | None = None, check_ranks: bool = False):
        from mpi4py import MPI

        if n_ranks < 1:
            raise ValueError(f"n_ranks must be >= 1, got {n_ranks}")
        args = ["-m", "trtllm_autojudge.trt.runner.tp_pool", "--factory", factory, "--kwargs", json.dumps(kwargs or {})]
        if check_ranks:
            args.append("--check_ranks")
        try:
            self.inter = MPI.COMM_SELF.Spawn(sys.executable, args=args, maxprocs=n_ranks)
        except MPI.Exception as e:
            raise RuntimeError(f"spawning {n_ranks} MPI ranks failed ({e}): start this process under `mpirun -n 1` "
                               f"(add --allow-run-as-root as root, --oversubscribe with more ranks than cores)") from e
        self._root = MPI.ROOT
        status = self.inter.recv(source=0)
        if isinstance(status, str):
            self.inter.Disconnect()
            raise RuntimeError(f"the target workers failed to start: {status}")
        self.needs_draft_hidden, self.needs_greedy_child = status

    def verify(self, cycle: PackedCycle) -> Acceptance:
        self.inter.bcast(cycle, root=self._root)
        result = self.inter.recv(source=0)
        if isinstance(result, str):
            raise RuntimeError(f"the target workers failed: {result}")
        return result

    def close(self) -> None:
        if self.inter is not None:
            self.inter.bcast(None, root=self._root)
            self.inter.Disconnect()
            self.inter = None


def worker_main(argv: list[str] | None = None) -> int:
    from mpi4py import MPI

    ap = argparse.ArgumentParser(prog="python -m trtllm_autojudge.trt.runner.tp_pool")
    ap.add_argument("--factory", required=True)
    ap.add_argument("--kwargs", default="{}")
    ap.add_argument("--check_ranks", action="store_true")
    args = ap.parse_args(argv)
    parent, comm = MPI.Comm.Get_parent(), MPI.COMM_WORLD
    if parent == MPI.COMM_NULL:
        print("tp_pool workers are spawned by SpawnedTargetPool; do not start them by hand", file=sys.stderr)
        return 2
    rank = comm.Get_rank()
    try:
        verifier = load_factory(args.factory)(rank=rank, **json.loads(args.kwargs))
        status = (bool(verifier.needs_draft_hidden), bool(verifier.needs_greedy_child))  # what the cycles must carry
    except Exception as e:  # report to the parent instead of hanging it
        verifier, status = None, f"rank {rank}: {type(e).__name__}: {e}"
    statuses = comm.allgather(status)
    if rank == 0:
        errors = [s for s in statuses if isinstance(s, str)]
        parent.send("; ".join(errors) if errors else status, dest=0)
    if any(isinstance(s, str) for s in statuses):
        parent.Disconnect()
        return 0  # the parent raises with the message; a non-zero exit would make mpirun abort the parent too
    while True:
        cycle = parent.bcast(None, root=0)
        if cycle is None:
            break
        try:
            result = verifier.verify(cycle)
            if args.check_ranks:
                check_rank_agreement(comm, result)
        except Exception as e:
            result = f"rank {rank}: {type(e).__name__}: {e}"
        errors = [r for r in comm.gather(result if isinstance(result, str) else None, root=0) or [] if r]
        if rank == 0:
            parent.send("; ".join(errors) if errors else result, dest=0)
    parent.Disconnect()
    return 0


if __name__ == "__main__":
    sys.exit(worker_main())

"""Tensor-parallel agreement on CPU: 2 MPI ranks run the engine-path loop with the reference engines
on replicated models and inputs, check every cycle's decision across ranks, and produce the same
tokens as each other and as the reference loop. Run as a script under mpirun by the test below."""
import os
import subprocess
import sys

import pytest

from mpi_launch import mpirun

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)



def test_two_ranks_decide_the_same_token_for_token():
    pytest.importorskip("mpi4py")
    # PYTHONPATH: the ranks import this checkout, not an installed copy of the package
    env = dict(os.environ, OMPI_MCA_rmaps_base_oversubscribe="1", OMP_NUM_THREADS="1",
               PYTHONPATH=os.pathsep.join(filter(None, [REPO, os.environ.get("PYTHONPATH")])))
    done = subprocess.run([*mpirun(), "-n", "2", sys.executable, os.path.abspath(__file__)], capture_output=True,
                          text=True, timeout=120, env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "rank 0 agrees" in done.stdout and "rank 1 agrees" in done.stdout


def rank_main() -> None:
    sys.path.insert(0, HERE)
    import numpy as np
    import torch
    from mpi4py import MPI

    from tiny_models import EOS, VOCAB, tiny_pair
    from trtllm_autojudge.decoding.modes import JudgeRule
    from trtllm_autojudge.decoding.speculative import speculative_generate
    from trtllm_autojudge.judge.head import JudgeHead
    from trtllm_autojudge.trt.runner.loop import engine_generate
    from trtllm_autojudge.trt.runner.packing import chain_tree, pack_cycle
    from trtllm_autojudge.trt.runner.reference_engine import ReferenceDrafter, ReferenceTargetEngine
    from trtllm_autojudge.trt.runner.tp import check_rank_agreement, same_on_all_ranks

    torch.set_num_threads(1)
    comm = MPI.COMM_WORLD
    rank = comm.Get_rank()
    # Every rank holds the same weights (TP ranks hold shards, but their final hidden states and
    # logits are replicated: see trtllm_autojudge/trt/runner/tp.py).
    target, draft = tiny_pair(seed=0)
    target.model.double()
    draft.model.double()
    rng = np.random.default_rng(0)
    head = JudgeHead(rng.normal(size=64), np.zeros(64), np.ones(64), 0.0, "DT", 64, 64)
    # Requests come from rank 0, as the runner broadcasts the draft's proposal.
    prompts = comm.bcast([rng.integers(3, VOCAB, size=5).tolist() for _ in range(2)] if rank == 0 else None, root=0)
    thresholds, tree = [0.3, 0.6], chain_tree(3, 2)

    class AgreeingVerifier(ReferenceTargetEngine):
        cycles = 0

        def verify(self, cycle):
            assert same_on_all_ranks(comm, cycle.input_ids) and same_on_all_ranks(comm, cycle.draft_tokens)
            acc = super().verify(cycle)
            check_rank_agreement(comm, acc)  # raises on every rank if any rank decided differently
            AgreeingVerifier.cycles += 1
            return acc

    results = engine_generate(ReferenceDrafter(draft), AgreeingVerifier(target, head), prompts, tree=tree,
                              thresholds=thresholds, max_new_tokens=16, stop_ids=[EOS])
    tokens = [r.tokens for r in results]
    assert all(t == tokens for t in comm.allgather(tokens)), "ranks produced different tokens"
    for prompt, t, res in zip(prompts, thresholds, results):
        ref = speculative_generate(target, draft, prompt, tree=tree, rule=JudgeRule(head, t), max_new_tokens=16)
        assert res.tokens == ref.tokens, "the engine loop differs from the reference loop"
    # A rank that judges with another threshold is caught.
    proposal = ReferenceDrafter(draft).propose(prompts, tree, False)
    skewed = pack_cycle(prompts, tree, proposal.node_tokens, proposal.draft_lens, [0.0 if rank == 0 else 1.0] * 2)
    acc = ReferenceTargetEngine(target, head).verify(skewed)
    try:
        check_rank_agreement(comm, acc)
    except RuntimeError as e:
        assert "accepted differently" in str(e)
    else:
        raise AssertionError("check_rank_agreement missed ranks that decided differently")
    print(f"rank {rank} agrees after {AgreeingVerifier.cycles} cycles", flush=True)


if __name__ == "__main__":
    rank_main()

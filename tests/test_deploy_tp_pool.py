"""Orchestrator mode on CPU: one process (under mpirun -n 1) spawns 2 target ranks running the
reference engine with a lookahead judge, drives the engine loop through them (the ranks tell it to
pack greedy children) and gets the reference loop's tokens."""
import os
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
MAX_NEW = 12


def reference_verifier(rank, setup="DT-DT1"):
    """Worker factory: every rank builds the same tiny target and judge."""
    sys.path.insert(0, HERE)
    import numpy as np
    import torch

    from tiny_models import tiny_pair
    from trtllm_autojudge.judge.head import JudgeHead, feature_dim
    from trtllm_autojudge.trt.runner.reference_engine import ReferenceTargetEngine

    torch.set_num_threads(1)
    target, _ = tiny_pair(seed=0)
    target.model.double()
    rng = np.random.default_rng(0)
    F = feature_dim(setup, 64, 64)
    return ReferenceTargetEngine(target, JudgeHead(rng.normal(size=F), np.zeros(F), np.ones(F), 0.0, setup, 64, 64))


def failing_verifier(rank):
    raise ValueError(f"no engine for rank {rank}")


def test_spawned_ranks_serve_the_engine_loop():
    pytest.importorskip("mpi4py")
    from test_deploy_mpi import mpirun

    # PYTHONPATH: the ranks import this checkout, not an installed copy of the package
    env = dict(os.environ, OMPI_MCA_rmaps_base_oversubscribe="1", OMP_NUM_THREADS="1",
               PYTHONPATH=os.pathsep.join(filter(None, [REPO, os.environ.get("PYTHONPATH")])))
    done = subprocess.run([*mpirun(), "-n", "1", "--oversubscribe", sys.executable, os.path.abspath(__file__)],
                          capture_output=True, text=True, timeout=120, env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "orchestrator ok" in done.stdout


def parent_main() -> None:
    sys.path.insert(0, HERE)
    import numpy as np
    import torch

    from tiny_models import EOS, VOCAB, tiny_pair
    from trtllm_autojudge.decoding.modes import JudgeRule
    from trtllm_autojudge.decoding.speculative import speculative_generate
    from trtllm_autojudge.trt.runner.loop import engine_generate
    from trtllm_autojudge.trt.runner.packing import chain_tree
    from trtllm_autojudge.trt.runner.reference_engine import ReferenceDrafter
    from trtllm_autojudge.trt.runner.tp_pool import SpawnedTargetPool

    torch.set_num_threads(1)
    target, draft = tiny_pair(seed=0)
    target.model.double()
    draft.model.double()
    head = reference_verifier(0).head
    pool = SpawnedTargetPool(2, f"{os.path.abspath(__file__)}:reference_verifier", check_ranks=True)
    assert (pool.needs_draft_hidden, pool.needs_greedy_child) == (False, True)  # a lookahead judge's cycles
    rng = np.random.default_rng(4)
    prompts = [rng.integers(3, VOCAB, size=4).tolist() for _ in range(2)]
    tree, thresholds = chain_tree(3, 2), [0.2, 0.7]
    try:
        results = engine_generate(ReferenceDrafter(draft), pool, prompts, tree=tree, thresholds=thresholds,
                                  max_new_tokens=MAX_NEW, stop_ids=[EOS])
    finally:
        pool.close()
    for prompt, t, res in zip(prompts, thresholds, results):
        ref = speculative_generate(target, draft, prompt, tree=tree, rule=JudgeRule(head, t), max_new_tokens=MAX_NEW)
        assert res.tokens == ref.tokens, (res.tokens, ref.tokens)
    try:
        SpawnedTargetPool(2, f"{os.path.abspath(__file__)}:failing_verifier")
    except RuntimeError as e:
        assert "no engine for rank 0" in str(e) and "no engine for rank 1" in str(e)
    else:
        raise AssertionError("a factory that fails must stop the pool")
    print("orchestrator ok", flush=True)


if __name__ == "__main__":
    parent_main()

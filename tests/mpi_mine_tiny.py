"""Mine 6 tiny prompts into argv[1] with the miner argv[2] (plain | fast); run alone or under mpirun
by tests/test_mining*.py. float64, so the fast miner's batches give the plain loop's labels. With
argv[3] = K the process SIGKILLs itself the K-th time it returns from collecting results while
more than one regeneration is still running (inside a speculative batch)."""
import os
import signal
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE, os.path.dirname(HERE)]  # tests/ and the checkout whose package is under test

import torch  # noqa: E402

torch.set_num_threads(1)

from test_mining import KeyTokens, decode, tiny_prompts  # noqa: E402
from tiny_models import tiny_pair  # noqa: E402
from trtllm_autojudge.mining.miner import MiningConfig  # noqa: E402
from trtllm_autojudge.mining.run import make_miner, mine_prompts  # noqa: E402

target, draft = tiny_pair(seed=3, dtype=torch.float64)
fast = sys.argv[2] == "fast"
config = MiningConfig(max_new_tokens=12, depth=4 if fast else 1)
miner = make_miner(target, draft, KeyTokens(window=8), decode, config, batch_size=2 if fast else 1)
if len(sys.argv) > 3:
    kill_at, backend = int(sys.argv[3]), miner.regenerator
    collect, batches = backend.collect, []

    def collect_then_die():
        done = collect()
        if len(backend.rows) > 1:  # several regenerations still running
            batches.append(1)
            if len(batches) == kill_at:
                os.kill(os.getpid(), signal.SIGKILL)
        return done

    backend.collect = collect_then_die
mine_prompts(miner, tiny_prompts(6, seed=2), sys.argv[1], progress=False)

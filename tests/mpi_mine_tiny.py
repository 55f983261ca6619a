"""Mine 6 tiny prompts into argv[1]; run alone or under mpirun by tests/test_mining.py."""
import sys

sys.path.insert(0, __import__("os").path.dirname(__file__))

import torch  # noqa: E402

torch.set_num_threads(1)

from test_mining import KeyTokens, decode, tiny_prompts  # noqa: E402
from tiny_models import tiny_pair  # noqa: E402
from trtllm_autojudge.mining.miner import LabelMiner, MiningConfig  # noqa: E402
from trtllm_autojudge.mining.run import mine_prompts  # noqa: E402

target, draft = tiny_pair(seed=3)
miner = LabelMiner(target, draft, KeyTokens(window=8), decode, MiningConfig(max_new_tokens=12))
mine_prompts(miner, tiny_prompts(6, seed=2), sys.argv[1], progress=False)

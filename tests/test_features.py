"""Judge features: each block equals a plain forward over the swapped sequence."""
import numpy as np
import torch

from test_mining import KeyTokens, decode, tiny_prompts
from tiny_models import tiny_pair
from trtllm_autojudge.judge.head import feature_dim
from trtllm_autojudge.mining.features import extract_features
from trtllm_autojudge.mining.miner import LabelMiner, MiningConfig


def plain_hidden(lm, seq):
    with torch.no_grad():
        return lm.model.model(input_ids=torch.tensor([seq])).last_hidden_state[0, -1].numpy()


def test_blocks_equal_plain_forwards():
    target, draft = tiny_pair(seed=3)
    miner = LabelMiner(target, draft, KeyTokens(window=10), decode, MiningConfig(max_new_tokens=16))
    records = [miner.mine(p, record_id=pid) for pid, p, _ in tiny_prompts(3)]
    fs = extract_features(target, draft, records, progress=False)
    H = target.hidden_size
    assert fs.features.shape == (sum(len(r["labels"]) for r in records), feature_dim("DD-DT-TD-TT", H, H))
    row = 0
    for i, rec in enumerate(records):
        for pos, important, t_tok, d_tok in rec["labels"]:
            prefix = rec["final_ids"][:pos]
            expect = np.concatenate([plain_hidden(draft, prefix + [d_tok]), plain_hidden(target, prefix + [d_tok]),
                                     plain_hidden(draft, prefix + [t_tok]), plain_hidden(target, prefix + [t_tok])])
            np.testing.assert_allclose(fs.features[row].astype(np.float32), expect, atol=2e-2, rtol=1e-2)  # float16
            assert fs.labels[row] == important and fs.prompt_index[row] == i and fs.position[row] == pos
            row += 1

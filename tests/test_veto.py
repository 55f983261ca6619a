"""Token vetoes: the ids of a class, the table, and a judge that never accepts a vetoed mismatch."""
import numpy as np
import pytest

from test_speculative import MAX_NEW, prompts
from tiny_models import VOCAB, tiny_pair
from trtllm_autojudge.decoding.modes import JudgeRule
from trtllm_autojudge.decoding.speculative import speculative_generate
from trtllm_autojudge.decoding.tree import DraftTree
from trtllm_autojudge.judge.export import unsupported_reason
from trtllm_autojudge.judge.head import JudgeHead, feature_dim
from trtllm_autojudge.judge.veto import veto_record, veto_table, veto_token_ids


class Letters:
    """A tokenizer whose token i decodes to a short text: digits at every third id."""

    def __len__(self):
        return VOCAB

    def decode(self, ids):
        return "".join(f"x{i}" if i % 3 == 0 else "ab" for i in ids)


def test_digit_tokens_and_their_table():
    ids = veto_token_ids(Letters(), ["digits"])
    assert ids.tolist() == list(range(0, VOCAB, 3))
    record = veto_record(Letters(), ["digits"], "fp")
    assert record == {"classes": ["digits"], "tokenizer": "fp", "token_ids": ids.tolist()}
    table = veto_table(record, VOCAB)
    assert table.sum() == len(ids) and table[ids].all() and veto_table(None, VOCAB) is None
    with pytest.raises(ValueError, match="outside the vocabulary"):
        veto_table(record, VOCAB - 10)
    with pytest.raises(ValueError, match="choose from"):
        veto_token_ids(Letters(), ["vowels"])


def test_a_vetoed_mismatch_is_never_judged():
    """An accept-everything judge with a veto: no judged acceptance has a vetoed draft or target
    token, where the same judge without it has some; the veto changes the judge's fingerprint and
    keeps it out of the plugin and vLLM exports."""
    target, draft = tiny_pair(seed=0)
    F = feature_dim("DT", draft.hidden_size, target.hidden_size)
    head = JudgeHead(np.zeros(F), np.zeros(F), np.ones(F), -100.0, "DT", draft.hidden_size, target.hidden_size, 0.5)
    vetoed = JudgeHead(head.coef, head.mean, head.scale, head.intercept, "DT", head.draft_hidden, head.target_hidden,
                       0.5, meta={"veto": veto_record(Letters(), ["digits"], "fp")})
    table = veto_table(vetoed.meta["veto"], VOCAB)
    hits = 0
    for prompt in prompts(4):
        free = speculative_generate(target, draft, prompt, tree=DraftTree.chain(4), rule=JudgeRule(head), max_new_tokens=MAX_NEW)
        out = speculative_generate(target, draft, prompt, tree=DraftTree.chain(4), rule=JudgeRule(vetoed), max_new_tokens=MAX_NEW)
        hits += sum(table[d] or table[t] for _, d, t in free.judged_tokens)
        assert not any(table[d] or table[t] for _, d, t in out.judged_tokens)
    assert hits > 0
    assert vetoed.fingerprint() != head.fingerprint()
    assert not JudgeRule(vetoed).fusable and not JudgeRule(head, None, 2).fusable and JudgeRule(head).fusable
    assert "no token veto" in unsupported_reason(vetoed, "plugin") and unsupported_reason(head, "plugin") is None

"""On-policy labels on the tiny pair: each judged acceptance, labelled by the answers of the target's
greedy continuations before and after it (computed here with plain greedy decoding)."""
import numpy as np

from test_mining import KeyTokens, decode, tiny_prompts
from tiny_models import tiny_pair
from trtllm_autojudge.decoding.modes import JudgeRule
from trtllm_autojudge.decoding.speculative import greedy_generate, speculative_generate
from trtllm_autojudge.decoding.tree import DraftTree
from trtllm_autojudge.judge.head import JudgeHead, feature_dim
from trtllm_autojudge.mining.on_policy import OnPolicyMiner
from trtllm_autojudge.mining.run import mine_prompts
from trtllm_autojudge.mining.store import read_records

MAX_NEW = 24


def test_on_policy_labels_are_the_answer_changes_of_each_acceptance(tmp_path):
    target, draft = tiny_pair(seed=3)
    checker, rng = KeyTokens(window=12), np.random.default_rng(0)
    F = feature_dim("DT", draft.hidden_size, target.hidden_size)
    judge = JudgeHead(0.05 * rng.normal(size=F), np.zeros(F), np.ones(F), -0.3, "DT", draft.hidden_size,
                      target.hidden_size, 0.5)
    rule, tree = JudgeRule(judge), DraftTree.chain(4)
    miner = OnPolicyMiner(target, draft, checker, decode, rule, tree, MAX_NEW, "float32")
    out = tmp_path / "labels.jsonl"
    prompts = tiny_prompts(6, seed=5)
    mine_prompts(miner, prompts, out, progress=False)
    records = read_records(out)[0]
    assert [r["id"] for r in records] == [p[0] for p in prompts]
    labelled = important = 0
    for rec, (_, prompt, _) in zip(records, prompts):
        run = speculative_generate(target, draft, prompt, tree=tree, rule=rule, max_new_tokens=MAX_NEW)
        assert rec["final_ids"] == prompt + run.tokens
        previous = checker.answer(decode(greedy_generate(target, prompt, MAX_NEW)))
        assert rec["target_answer"] == previous
        assert len(rec["labels"]) == len(run.judged_tokens)
        for (pos, imp, t, d), (i, jd, jt) in zip(rec["labels"], run.judged_tokens):
            assert (pos, t, d) == (len(prompt) + i, jt, jd) and rec["final_ids"][pos] == d != t
            kept = run.tokens[: i + 1]
            state = checker.answer(decode(kept + greedy_generate(target, prompt + kept, MAX_NEW - len(kept))))
            assert imp == int(state != previous)
            previous = state
        labelled += len(rec["labels"])
        important += sum(lab[1] for lab in rec["labels"])
        assert rec["policy"]["judge"] == judge.fingerprint() and rec["policy"]["threshold"] == 0.5
    assert 0 < important < labelled  # both kinds occur on these prompts

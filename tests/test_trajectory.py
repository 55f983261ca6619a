"""The trajectory oracle: replayed cycles == a live oracle run that stays on the mined sequence."""
import pytest
import torch

from fixed_draft import FixedProposals
from tiny_models import tiny_pair
from trtllm_autojudge.decoding.modes import OracleRule
from trtllm_autojudge.decoding.speculative import speculative_generate
from trtllm_autojudge.decoding.tree import DraftTree
from trtllm_autojudge.evaluation.trajectory import live_divergence, record_replays, replay_chain
from trtllm_autojudge.mining.miner import LabelMiner, MiningConfig
from trtllm_autojudge.mining.store import unimportant_map


def decode(ids):
    return " ".join(str(i) for i in ids)


class LastToken:
    """Answer: the response's last token; most swaps deep inside a response are harmless."""

    name = "last-token"

    def answer(self, text, example=None):
        return text.split()[-1] if text.split() else None

    def is_final(self, text):
        return False

    def same(self, a, b):
        return a == b


@pytest.mark.parametrize("k", [1, 3, 6])
def test_replay_equals_the_live_oracle_in_float64(k):
    target, draft = tiny_pair(seed=4, dtype=torch.float64)
    miner = LabelMiner(target, draft, LastToken(), decode, MiningConfig(max_new_tokens=30))
    prompts = [[5, 9, 17], [33, 4], [60, 61, 62, 63]]
    records = [miner.mine(p, record_id=i) for i, p in enumerate(prompts)]
    assert sum(1 - lab[1] for r in records for lab in r["labels"]) >= 5  # the oracle has something to accept
    rule = OracleRule(unimportant_map(records))
    compared = 0
    for rec in records:
        live = speculative_generate(target, draft, rec["prompt_ids"], tree=DraftTree.chain(k), rule=rule,
                                    max_new_tokens=30)
        replay = record_replays(rec, draft, k)
        swaps = [i - len(rec["prompt_ids"]) for i in replay["oracle"].bonus_swaps]
        diverged = live_divergence(live.tokens, rec)
        # the live run leaves the mined sequence exactly at the replay's first bonus swap, if any
        assert diverged == (swaps[0] if swaps else None)
        if not swaps:
            compared += 1
            assert replay["oracle"].cycles == len(live.cycles)
            assert replay["oracle"].judged == sum(c.judged for c in live.cycles)
        lossless = speculative_generate(target, draft, rec["prompt_ids"], tree=DraftTree.chain(k), max_new_tokens=30)
        assert replay["lossless"].cycles == len(lossless.cycles)
        assert replay["lossless"].new_tokens == len(lossless.tokens)
    assert compared >= 1


def test_replay_by_hand():
    seq = [1, 2, 10, 11, 12, 13, 14]  # prompt [1, 2]
    target_next = list(seq)
    target_next[4] = 99  # position 4 holds a harmless draft token, the target wanted 99
    proposals = [0, 0, 10, 11, 12, 50, 14]  # the draft: right, right, the harmless swap, wrong at 5, right
    out = replay_chain(seq, 2, proposals, target_next, {4: {12}}, k=4)
    # cycle 1: 10, 11 exact, 12 judged, 50 rejected -> emits 10 11 12 + correction 13; cycle 2: 14 exact (end)
    assert (out.cycles, out.accepted, out.judged, out.new_tokens, out.bonus_swaps) == (2, 4, 1, 5, [])
    assert replay_chain(seq, 2, proposals, target_next, {}, k=4).cycles == 3  # lossless: rejected at 4 as well


def test_bonus_on_a_harmless_position_is_a_swap():
    seq, target_next = [1, 10, 11, 12], [1, 10, 11, 99]  # position 3: a harmless draft token 12
    out = replay_chain(seq, 1, [0, 10, 11, 12], target_next, {3: {12}}, k=2)
    assert (out.cycles, out.bonus_swaps) == (1, [3])  # 10, 11 accepted; the bonus slot takes the harmless 12


def test_replay_refuses_proposals_of_another_sequence():
    with pytest.raises(ValueError, match="do not belong to this sequence"):
        replay_chain([1, 5, 6], 1, [0, 7, 6], [0, 5, 6], {1: {7}}, k=2)


def test_live_divergence_point():
    rec = {"prompt_ids": [1], "final_ids": [1, 4, 5, 6]}
    assert live_divergence([4, 5, 6], rec) is None
    assert live_divergence([4, 9, 6], rec) == 1
    assert live_divergence([4, 5], rec) == 2


def test_trajectory_row_has_the_summary_columns():
    from trtllm_autojudge.evaluation.runner import SUMMARY_COLUMNS
    from trtllm_autojudge.evaluation.trajectory import trajectory_row

    target, draft = tiny_pair(seed=4)
    rec = LabelMiner(target, draft, LastToken(), decode, MiningConfig(max_new_tokens=20)).mine([5, 9, 17], record_id=0)
    lossless = {"gold_accuracy": 0.5, "gold_accuracy_lo": 0.2, "gold_accuracy_hi": 0.8, "tokens_per_cycle": 2.0}
    row = trajectory_row([rec], draft, 4, lossless)
    assert set(row) == set(SUMMARY_COLUMNS) and row["vs_lossless"] == row["tokens_per_cycle"] / 2.0
    assert row["new_tokens"] == len(rec["final_ids"]) - 3 and row["gold_accuracy"] == 0.5
    assert (row["gold_accuracy_lo"], row["gold_accuracy_hi"]) == (0.2, 0.8)  # the lossless run's gold, by construction
    assert (row["answers_changed"], row["answer_change_bound"], row["agreement_lo"]) == (0, 0.0, 1.0)
    assert 1.0 <= row["tokens_per_cycle"] <= 5.0



def test_oracle_replay_takes_the_mined_draft_token_where_a_pass_rounds_otherwise():
    # prompt [1]; the target said 20 at position 2, the draft 12 (harmless), so the trajectory holds 12
    record = {"prompt_ids": [1], "response_ids": [10, 20, 13], "final_ids": [1, 10, 12, 13],
              "labels": [[2, 0, 20, 12]]}
    flipped = FixedProposals([0, 10, 20, 13])  # this pass rounds position 2 to the target's token
    replay = record_replays(record, None, 4, flipped)["oracle"]
    assert (replay.flips, replay.judged, replay.cycles, replay.accepted) == (1, 1, 1, 3)
    assert record_replays(record, None, 4, FixedProposals([0, 10, 12, 13]))["oracle"].flips == 0

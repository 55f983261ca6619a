"""experiments/gate_analysis.py: the label kinds and the comments-free bound on a hand-made record."""
import runpy
from pathlib import Path

from fixed_draft import FixedProposals
from trtllm_autojudge.evaluation.trajectory import replay_chain

GATE = runpy.run_path(str(Path(__file__).resolve().parents[1] / "experiments" / "gate_analysis.py"))
PIECES = ["<p>", "x", " = 1", "\n", "#", " a", " b", "\n", "y", " = x", " c", " = 2"]  # id -> text


class _Tokenizer:
    def decode(self, ids):
        return "".join(PIECES[i] for i in ids)



def test_comments_free_accepts_comment_mismatches_only():
    record = {"prompt_ids": [0], "response_ids": [1, 2, 3, 4, 5, 6, 7, 8, 9]}  # x = 1 / # a b / y = x
    seq = record["prompt_ids"] + record["response_ids"]
    proposals = [0, 1, 2, 3, 4, 10, 6, 7, 8, 11]  # the draft says " c" in the comment and " = 2" in the code
    tokenizer, draft = _Tokenizer(), FixedProposals(proposals)
    assert [GATE["line_kind"](tokenizer, seq, 1, i) for i in (1, 4, 5, 8, 9)] == ["line_start", "line_start", "comment", "line_start", "code"]
    lossless = replay_chain(seq, 1, proposals, seq, {}, k=8)
    free = GATE["comments_free_replay"](tokenizer, record, draft, 8)
    assert (lossless.cycles, lossless.accepted) == (2, 7)  # stops at the comment and at the code mismatch
    assert (free.cycles, free.accepted, free.judged) == (1, 8, 1)  # the comment mismatch passes; the window is full
    assert free.new_tokens == lossless.new_tokens == 9
    no_comment_miss = [0, 1, 2, 3, 4, 5, 6, 7, 8, 11]
    same = GATE["comments_free_replay"](tokenizer, record, FixedProposals(no_comment_miss), 8)
    assert (same.cycles, same.judged) == (replay_chain(seq, 1, no_comment_miss, seq, {}, 8).cycles, 0)

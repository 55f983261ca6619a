"""experiments/window_probe.py: the statistics after a judged acceptance, and its refusals."""
import json
import runpy
from pathlib import Path

import numpy as np
import pytest
import torch

SCRIPT = runpy.run_path(str(Path(__file__).resolve().parents[1] / "experiments" / "window_probe.py"),
                        run_name="window_probe")


def test_window_statistics_equal_a_direct_computation_and_clip_at_the_end():
    gen = torch.Generator().manual_seed(0)
    logits = torch.randn(30, 50, generator=gen) * 3  # [L, V]
    rows, line_ends = [3, 12, 27], [9, 13, 40]  # the last window and line run past the end
    stats = SCRIPT["window_stats"](logits, rows, (4, 8), line_ends)
    lp = torch.log_softmax(logits, -1)
    for j, row in enumerate(rows):
        for name, stop in (("4", row + 4), ("8", row + 8), ("line2", line_ends[j])):
            stop = min(stop, 30)
            span = lp[row:stop]  # [W, V]
            top = span.sort(-1, descending=True).values
            entropy = [-(p.exp() * p).sum().item() for p in span]
            assert stats[f"margin_min_{name}"][j] == pytest.approx((top[:, 0] - top[:, 1]).min().item(), abs=1e-5)
            assert stats[f"entropy_mean_{name}"][j] == pytest.approx(np.mean(entropy), abs=1e-5)
            assert stats[f"entropy_max_{name}"][j] == pytest.approx(max(entropy), abs=1e-5)
    # low margins and target-token log-probs are alarming; high entropies and draft-token log-probs are
    assert list(SCRIPT["harm_score"]("margin_min_4", np.array([1.0, 2.0]))) == [-1.0, -2.0]
    assert list(SCRIPT["harm_score"]("lp_target_token", np.array([-1.0, -2.0]))) == [1.0, 2.0]
    assert list(SCRIPT["harm_score"]("entropy_max_4", np.array([1.0, 2.0]))) == [1.0, 2.0]
    assert list(SCRIPT["harm_score"]("lp_draft_token", np.array([-1.0, -2.0]))) == [-1.0, -2.0]


def test_the_line_after_the_swap_ends_at_its_newline():
    class Tok:
        words = {0: "# a", 1: " b", 2: "\n", 3: "v1", 4: " = 3", 5: "\n", 6: "# c"}

        def decode(self, ids):
            return "".join(self.words[i] for i in ids)

    tokens = [0, 1, 2, 3, 4, 5, 6]
    assert SCRIPT["line_end"](Tok(), tokens, 1) == 5  # the swap's line ends at 2, the next at 5
    assert SCRIPT["line_end"](Tok(), tokens, 4) == 7  # no second newline: the response's end


def test_bad_runs_are_refused_before_the_model_loads(tmp_path):
    main = SCRIPT["main"]
    q = tmp_path / "q.jsonl"
    q.write_text(json.dumps({"question": "How many?"}) + "\n")
    with pytest.raises(SystemExit, match="give FOLDER:SPEC"):
        main(["--runs", "judge@0.1", "--questions", str(q)])
    (tmp_path / "runs.jsonl").write_text(json.dumps({"spec": "lossless", "qid": "x", "answer": "1"}) + "\n")
    with pytest.raises(SystemExit, match=r"holds no judge@0.1 run .*specs there: \['lossless'\]"):
        main(["--runs", f"{tmp_path}:judge@0.1", "--questions", str(q)])
    (tmp_path / "runs.jsonl").write_text("".join(json.dumps(r) + "\n" for r in (
        {"spec": "lossless", "qid": "x", "answer": "1"},
        {"spec": "judge@0.1", "qid": "x", "answer": "1", "judged_tokens": [[0, 1, 2]]})))
    with pytest.raises(SystemExit, match="1 questions of .* are in no --questions file"):
        main(["--runs", f"{tmp_path}:judge@0.1", "--questions", str(q)])


def test_the_judge_logit_equals_the_rules_on_the_chain_the_response_was():
    from trtllm_autojudge.judge.head import JudgeHead
    from trtllm_autojudge.judge.lookahead import node_lookahead

    gen = torch.Generator().manual_seed(1)
    L, V, H = 24, 40, 8
    logits, hidden = torch.randn(L, V, generator=gen) * 2, torch.randn(L, H, generator=gen)  # [L, V], [L, H]
    seq = torch.randint(0, V, (L,), generator=gen)  # [L]
    F = 3 * H + 6
    head = JudgeHead(coef=np.random.default_rng(2).normal(size=F), mean=np.zeros(F), scale=np.ones(F),
                     intercept=0.3, setup="DT-DT1-DT2-LS", draft_hidden=H, target_hidden=H, threshold=0.1)
    rows = [5, 9, 21, 22]  # the last has no c2 in the sequence: no verdict
    got = SCRIPT["judge_logits"](head, logits, hidden, seq, rows)
    a, N = 4, L - 1 - 4  # the chain: root = token a, nodes 1..N = tokens a+1..a+N
    child = np.append(np.arange(1, N + 1), -1)  # [N+1]
    nodes = np.array(rows[:3]) - a
    blocks, has = node_lookahead(head.blocks, child, seq[a + 1:].numpy(), nodes, logits[a:], hidden[a:], None)
    blocks["DT"] = hidden[a:][torch.as_tensor(nodes)]
    want = head.logits(torch.cat([blocks[b] for b in head.blocks], -1).double().numpy())
    assert has.all()
    np.testing.assert_allclose(got[:3], want, rtol=1e-5)
    assert np.isnan(got[3])
    assert SCRIPT["harm_score"]("judge_logit", got)[3] < SCRIPT["harm_score"]("judge_logit", got)[:3].min()


def test_a_judge_that_reads_the_draft_is_refused_before_the_model_loads(tmp_path):
    from trtllm_autojudge.judge.head import JudgeHead

    F = 4 + 4
    JudgeHead(coef=np.ones(F), mean=np.zeros(F), scale=np.ones(F), intercept=0.0, setup="DD-DT", draft_hidden=4,
              target_hidden=4).save(tmp_path / "j.safetensors")
    q = tmp_path / "q.jsonl"
    q.write_text(json.dumps({"question": "How many?"}) + "\n")
    with pytest.raises(SystemExit, match="setup DD-DT reads the draft's hidden states"):
        SCRIPT["main"](["--runs", f"{tmp_path}:judge", "--questions", str(q), "--judge", str(tmp_path / "j.safetensors")])

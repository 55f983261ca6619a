"""build_scripts/window_probe.py: the statistics after a judged acceptance, and its refusals."""
import json
import runpy
from pathlib import Path

import numpy as np
import pytest
import torch

SCRIPT = runpy.run_path(str(Path(__file__).resolve().parents[1] / "build_scripts" / "window_probe.py"),
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

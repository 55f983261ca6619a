"""`trtllm-autojudge demo --questions 2` end to end on the embedded pair and the shipped judge."""
import json

from trtllm_autojudge.demo import main
from trtllm_autojudge.tasks import Gsm8kProgramTask


def test_demo_runs_end_to_end(tmp_path, capsys):
    out = tmp_path / "demo"
    assert main(["--questions", "2", "--max-new-tokens", "96", "--out-dir", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "lossless" in printed and "topk@2" in printed
    assert ("judge@" in printed) == Gsm8kProgramTask().shipped_judge_path().is_file()  # the default task
    assert "held-out instances of the training templates" in printed and "x the tokens per target forward" in printed
    summary = json.loads((out / "summary.json").read_text())
    assert summary["meta"]["task"] == "gsm8k-program"
    rows = {r["spec"]: r for r in summary["rows"]}
    assert rows["lossless"]["agreement"] == 1.0 and rows["lossless"]["questions"] == 2
    assert all(r["tokens_per_cycle"] >= 1.0 for r in rows.values())
    assert (out / "frontier.png").read_bytes()[:4] == b"\x89PNG"


def test_closing_lines_compare_every_method_with_lossless():
    from trtllm_autojudge.demo import closing_lines

    row = lambda spec, method, params, tpc, agree, gold: dict(spec=spec, method=method, params=params, tokens_per_cycle=tpc,  # noqa: E731
                                                             agreement=agree, gold_accuracy=gold)
    text = closing_lines([row("lossless", "lossless", "", 4.0, 1.0, 0.9), row("judge@0.5", "judge", "0.5", 5.0, 0.95, 0.85),
                          row("topk@2", "topk", "2", 3.0, 0.2, 0.1)])
    lines = text.splitlines()
    assert lines[0].startswith("lossless") and "4.00 tokens per target forward" in lines[0] and "90%" in lines[0]
    assert lines[1].startswith("AutoJudge @ 0.5: 1.25x") and "95% of the questions" in lines[1]
    assert lines[2].startswith("topk@2: 0.75x") and "gold accuracy 10%" in lines[2]
    bounded = dict(row("judge@0.5", "judge", "0.5", 5.0, 0.95, 0.85), vs_lossless_lo=0.98, vs_lossless_hi=1.4)
    assert "1.25x the tokens per target forward of lossless (95% interval over these questions: 0.98-1.40x)" in \
        closing_lines([row("lossless", "lossless", "", 4.0, 1.0, 0.9), bounded])
    assert "oracle" in lines[-1]


def test_demo_runs_the_judge_files_own_threshold_even_off_its_frontier():
    """A calibrated judge's default is not a point of its validation frontier: the demo still runs it."""
    from dataclasses import replace

    from trtllm_autojudge.demo import demo_thresholds
    from trtllm_autojudge.evaluation.common import judge_thresholds
    from trtllm_autojudge.judge.head import JudgeHead

    judge = JudgeHead.load(Gsm8kProgramTask().shipped_judge_path())
    five = judge_thresholds("auto", judge, harm_caps=(0.05,))
    assert demo_thresholds(None, judge) == sorted({judge.threshold, *five}) and len(five) == 1
    calibrated = replace(judge, threshold=0.0123456)
    assert demo_thresholds(None, calibrated) == [0.0123456, *five]
    assert demo_thresholds("0.2,0.3", calibrated) == [0.2, 0.3] and demo_thresholds(None, None) == []

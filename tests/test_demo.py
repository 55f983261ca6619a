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

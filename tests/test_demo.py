"""`trtllm-autojudge demo --questions 2` end to end on the embedded pair and the shipped judge."""
import json

from trtllm_autojudge.demo import main
from trtllm_autojudge.tasks import Gsm8kCotTask


def test_demo_runs_end_to_end(tmp_path, capsys):
    out = tmp_path / "demo"
    assert main(["--questions", "2", "--max-new-tokens", "96", "--out-dir", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "lossless" in printed and "topk@2" in printed
    assert ("judge@" in printed) == Gsm8kCotTask().shipped_judge_path().is_file()
    rows = {r["spec"]: r for r in json.loads((out / "summary.json").read_text())["rows"]}
    assert rows["lossless"]["agreement"] == 1.0 and rows["lossless"]["questions"] == 2
    assert all(r["tokens_per_cycle"] >= 1.0 for r in rows.values())
    assert (out / "frontier.png").read_bytes()[:4] == b"\x89PNG"

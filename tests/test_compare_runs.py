"""experiments/compare_runs.py: identical and differing runs of two eval folders, point by point."""
import json
import runpy
from pathlib import Path

MAIN = runpy.run_path(str(Path(__file__).resolve().parents[1] / "experiments" / "compare_runs.py"),
                      run_name="compare_runs")["main"]


def write_runs(folder: Path, runs: list[dict]) -> Path:
    folder.mkdir()
    (folder / "runs.jsonl").write_text("".join(json.dumps(r) + "\n" for r in runs))
    return folder


def test_identical_runs_pass_and_a_difference_is_located(tmp_path, capsys):
    base = [{"spec": "lossless", "qid": "q1", "tokens": [1, 2, 3], "answer": "6"},
            {"spec": "judge@0.005", "qid": "q1", "tokens": [1, 2, 4], "answer": "7"},
            {"spec": "judge@0.005", "qid": "q2", "tokens": [5, 6], "answer": "11"}]
    a = write_runs(tmp_path / "a", base)
    same = write_runs(tmp_path / "same", base[::-1])
    assert MAIN(["--a", str(a), "--b", str(same)]) == 0
    other = write_runs(tmp_path / "other", base[:2] + [{"spec": "judge@0.005", "qid": "q2", "tokens": [5, 9, 9],
                                                        "answer": "12"}])
    out = tmp_path / "cmp.json"
    assert MAIN(["--a", str(a), "--b", str(other), "--out", str(out)]) == 1
    points = {r["spec"]: r for r in json.loads(out.read_text())["points"]}
    assert points["lossless"]["identical"] == 1 and not points["lossless"]["differ"]
    assert points["judge@0.005"]["identical"] == 1
    assert points["judge@0.005"]["differ"] == [{"qid": "q2", "first_difference": 1, "answers": ["11", "12"]}]
    assert "1 of 2 questions identical" in capsys.readouterr().out
    assert MAIN(["--a", str(a), "--b", str(other), "--specs", "lossless"]) == 0

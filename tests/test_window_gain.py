"""experiments/window_gain.py: tokens per forward against K, from eval summaries and calibrate results."""
import json
import runpy
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
main = runpy.run_path(str(REPO / "experiments" / "window_gain.py"))["main"]


def row(spec, tpc, ratio=1.0, changed=0, n=10):
    return {"spec": spec, "tokens_per_cycle": tpc, "vs_lossless": ratio, "vs_lossless_lo": ratio - 0.01,
            "vs_lossless_hi": ratio + 0.01, "answers_changed": changed, "answer_change_bound": 0.2, "questions": n}


def test_points_from_a_summary_and_a_calibration_with_the_oracle(tmp_path):
    oracle = tmp_path / "oracle.json"
    oracle.write_text(json.dumps({"replays": {"k16": {"lossless": 12.0, "oracle": 14.4}, "k32": {"lossless": 18.0,
                                                                                               "oracle": 24.3}}}))
    summary, calibration = tmp_path / "summary.json", tmp_path / "calibration.json"
    summary.write_text(json.dumps({"rows": [row("lossless", 12.5), row("judge", 13.4, 1.07, 3)]}))
    calibration.write_text(json.dumps({"lossless": row("lossless", 18.7), "candidates": [row("judge@0.04", 20.5, 1.1, 1)]}))
    out, data = tmp_path / "gain.png", tmp_path / "gain.json"
    assert main(["--oracle", str(oracle), "--point", f"16:report:{summary}:judge",
                 "--point", f"32:calibration:{calibration}:judge@0.04", "--out", str(out), "--json", str(data)]) == 0
    result = json.loads(data.read_text())
    assert [(p["k"], p["autojudge"], p["lossless"], p["vs_lossless"]) for p in result["points"]] == [
        (16, 13.4, 12.5, 1.07), (32, 20.5, 18.7, 1.1)]
    assert result["oracle"]["32"]["vs_lossless"] == pytest.approx(1.35)
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    with pytest.raises(SystemExit, match="give K:LABEL:FILE:SPEC"):
        main(["--oracle", str(oracle), "--point", f"32:c:{calibration}:judge@0.9", "--out", str(out)])

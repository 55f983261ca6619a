"""build_scripts/bench_mining.py on the tiny pair and the toy task: the miners it names run side by
side, the exact ones mine the plain miner's labels (float64), and the summary has the keys the
work item names."""
import json
import runpy
from pathlib import Path

import pytest
import torch

import toy_task
from tiny_models import tiny_pair

BENCH = runpy.run_path(str(Path(__file__).resolve().parents[1] / "build_scripts" / "bench_mining.py"))


@pytest.fixture
def bench(monkeypatch):
    target, draft = tiny_pair(seed=3, dtype=torch.float64)
    monkeypatch.setitem(BENCH["main"].__globals__, "load_pair", lambda args, task: (target, draft, toy_task.ToyTokenizer()))
    return BENCH["main"]


def test_bench_runs_the_named_miners_side_by_side(bench, tmp_path):
    out = tmp_path / "mining.json"
    assert bench(["--task", "toy_task:ToyTask", "--limit", "3", "--max-new-tokens", "12", "--batch-size", "3",
                  "--depth", "2", "--miners", "plain,lookup,lookup-batched", "--ranks", "1", "--no-bf16", "--lookup-windows", "2:16",
                  "--work", str(tmp_path / "work"), "--out", str(out)]) == 0
    summary = json.loads(out.read_text())
    assert {"labels_per_min_plain", "labels_per_min_fast", "labels_identical", "command"} <= set(summary)
    assert summary["fast_miner"] in ("lookup", "lookup-batched")
    for name in ("lookup", "lookup_batched"):
        assert summary[f"labels_identical_{name}"] is True  # float64: the plain loop's labels
        assert summary[name]["labels"] == summary["plain"]["labels"] > 0
    assert summary["lookup_batched"]["flags"] == "--regenerator lookup --batch-size 3 --speculation-depth 2 --lookup-windows 2:16"
    assert "fast" not in summary and "--miners plain,lookup,lookup-batched" in summary["command"]


def test_bench_refuses_unknown_miners_and_a_run_without_plain(bench, tmp_path):
    for miners in ("plain,lookahead", "lookup"):
        with pytest.raises(SystemExit, match="--miners: choose among plain,fast,lookup"):
            bench(["--task", "toy_task:ToyTask", "--miners", miners, "--work", str(tmp_path)])

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


def test_ranks_run_plain_and_the_fastest_exact_miner_under_mpirun(bench, tmp_path, monkeypatch):
    """--ranks R: plain and the fastest exact miner each run under mpirun -n R, and the summary holds
    their ratio at equal ranks. mpirun is faked: it replays the one-process labels, at 10 labels/min
    for plain and 45 for the fast miner (20 and 90 per CPU-minute)."""
    work, calls = tmp_path / "work", []
    rates = {"plain": 10.0, "lookup-batched": 45.0}

    def fake_run(cmd, **kwargs):
        calls.append(cmd)
        out = Path(cmd[cmd.index("--out") + 1])
        name = out.name.removesuffix("-2ranks.jsonl")
        out.write_text((work / f"{name}.jsonl").read_text())  # the one-process run's labels
        labels = sum(len(json.loads(line)["labels"]) for line in out.read_text().splitlines())
        stats = {"prompts": 3, "labels": labels, "important": 0, "seconds": 1.0, "cpu_seconds": 2.0,
                 "labels_per_minute": rates[name], "labels_per_cpu_minute": 2 * rates[name],
                 "unimportant_share": 0.5, "target_tokens_per_label": 9.0, "wasted_share": 0.0,
                 "regenerations": labels, "wasted_regenerations": 0, "skipped_unlikely": 0}
        return type("Done", (), {"stdout": "mined\n" + json.dumps(stats)})()

    monkeypatch.setattr(BENCH["subprocess"], "run", fake_run)
    out = tmp_path / "mining.json"
    assert bench(["--task", "toy_task:ToyTask", "--limit", "3", "--max-new-tokens", "12", "--batch-size", "3",
                  "--depth", "2", "--miners", "plain,lookup-batched", "--no-bf16", "--lookup-windows", "2:16",
                  "--ranks", "2", "--work", str(work), "--out", str(out)]) == 0
    summary = json.loads(out.read_text())
    assert [c[c.index("-n") + 1] for c in calls] == ["2", "2"]
    assert "--batch-size 1 --speculation-depth 1" in " ".join(calls[0])  # plain first, then the fast miner
    assert "--regenerator lookup --batch-size 3" in " ".join(calls[1])
    for name in ("plain", "lookup_batched"):
        assert summary[f"{name}_2_ranks"]["vs_one_rank"]["prompts_identical"] == 3
        assert summary[f"{name}_2_ranks"]["labels"] == summary[name]["labels"] > 0
        assert summary[f"{name}_2_ranks"]["command"].startswith("mpirun -n 2 python -m trtllm_autojudge.cli mine")
    assert summary["speedup_lookup_batched_2_ranks"] == 4.5
    assert summary["speedup_lookup_batched_2_ranks_cpu_time"] == 4.5
    assert summary["mpi_command"] == summary["lookup_batched_2_ranks"]["command"]

"""Label mining: labels known by construction, plain == fast, resume, MPI shards (checkers: test_tasks.py)."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from mpi_launch import mpirun
from positional_lm import PositionalLM
from tiny_models import VOCAB, tiny_pair
from trtllm_autojudge.generation.regen_transformers import TransformersRegenerator
from trtllm_autojudge.mining.fast import FastLabelMiner
from trtllm_autojudge.mining.miner import LabelMiner, MiningConfig
from trtllm_autojudge.mining.run import mine_prompts
from trtllm_autojudge.mining.store import read_records, unimportant_map

HERE = Path(__file__).parent


def decode(ids):
    return " ".join(str(i) for i in ids)


class KeyTokens:
    """Answer: the key tokens (id % 5 == 0) among the first `window` response tokens."""

    name = "key-tokens"

    def __init__(self, window=None):
        self.window = window

    def _ids(self, text):
        return [int(t) for t in text.split()]

    def answer(self, text, example=None):
        ids = self._ids(text)[: self.window]
        return " ".join(str(i) for i in ids if i % 5 == 0)

    def is_final(self, text):
        return self.window is not None and len(self._ids(text)) >= self.window

    def same(self, a, b):
        return a == b


def test_labels_known_by_construction():
    V = 50
    f_target = lambda p: (3 * p + 1) % V  # noqa: E731
    f_draft = lambda p: (f_target(p) + 1) % V if p % 4 == 0 else f_target(p)  # noqa: E731
    miner = LabelMiner(PositionalLM(V, f_target), PositionalLM(V, f_draft), KeyTokens(), decode,
                       MiningConfig(max_new_tokens=30))
    prompt = [7, 8, 9]
    rec = miner.mine(prompt)
    n = len(prompt)
    expected = [[i, int(f_target(i) % 5 == 0 or f_draft(i) % 5 == 0), f_target(i), f_draft(i)]
                for i in range(n, n + 30) if i % 4 == 0]
    assert rec["labels"] == expected
    assert 0 < sum(lab[1] for lab in expected) < len(expected)  # both classes present
    for pos, important, t, d in rec["labels"]:  # unimportant swaps stay in the running sequence
        assert rec["final_ids"][pos] == (t if important else d)


def tiny_prompts(n, seed=0):
    g = torch.Generator().manual_seed(seed)
    return [(f"p{i}", torch.randint(3, VOCAB, (5,), generator=g).tolist(), None) for i in range(n)]


@pytest.fixture(scope="module")
def pair():
    return tiny_pair(seed=3)


def test_fast_mining_equals_plain_algorithm(pair):
    target, draft = pair
    checker = KeyTokens(window=10)
    fast = LabelMiner(target, draft, checker, decode, MiningConfig(max_new_tokens=24))
    plain = LabelMiner(target, draft, checker, decode, MiningConfig(max_new_tokens=24, early_stop=False, reuse_cache=False))
    n_labels = 0
    for pid, prompt, _ in tiny_prompts(6):
        a, b = fast.mine(prompt), plain.mine(prompt)
        assert a["labels"] == b["labels"] and a["alt_answers"] == b["alt_answers"]
        assert a["target_answer"] == b["target_answer"]
        n_labels += len(a["labels"])
        assert a["cost"]["target_forwarded_tokens"] < b["cost"]["target_forwarded_tokens"]
    assert n_labels > 10


def test_kill_and_resume(pair, tmp_path):
    target, draft = pair
    miner = LabelMiner(target, draft, KeyTokens(window=8), decode, MiningConfig(max_new_tokens=12))
    prompts = tiny_prompts(5, seed=1)
    clean = tmp_path / "clean.jsonl"
    mine_prompts(miner, prompts, clean, progress=False)
    # a run killed after 3 prompts, in the middle of writing the 4th record
    lines = clean.read_text().splitlines(keepends=True)
    killed = tmp_path / "killed.jsonl"
    killed.write_text("".join(lines[:3]) + lines[3][: len(lines[3]) // 2])
    stats = mine_prompts(miner, prompts, killed, progress=False)
    assert stats["prompts"] == 2  # only the unfinished ones are mined again
    assert [json.loads(x)["labels"] for x in killed.read_text().splitlines()] == [json.loads(x)["labels"] for x in lines]
    assert mine_prompts(miner, prompts, killed, progress=False)["prompts"] == 0  # nothing is redone


def test_a_rerun_that_orders_prompts_anew_redoes_nothing_another_rank_mined(pair, tmp_path, monkeypatch):
    """Rank 0 of 2: prompts in rank 1's shard are done, whichever rank the new order gives them to."""
    import trtllm_autojudge.mining.run as run

    target, draft = pair
    miner = LabelMiner(target, draft, KeyTokens(window=8), decode, MiningConfig(max_new_tokens=12))
    prompts = tiny_prompts(4, seed=1)
    out = tmp_path / "labels.jsonl"
    monkeypatch.setattr(run, "world", lambda: (1, 2, None))
    mine_prompts(miner, prompts, out, progress=False)  # rank 1 mined prompts 1 and 3 (index % 2 == 1)
    monkeypatch.setattr(run, "world", lambda: (0, 2, None))
    reordered = [prompts[1], prompts[0], prompts[3], prompts[2]]  # rank 0 now gets prompts 1 and 3
    assert mine_prompts(miner, reordered, out, progress=False)["prompts"] == 0
    assert not run.shard_path(out, 0, 2).exists() or not run.shard_path(out, 0, 2).read_text()


def test_merging_keeps_records_of_prompts_this_run_did_not_list(tmp_path):
    """Rank 0's merge after a smaller rerun (e.g. a lower --limit) keeps what earlier runs mined."""
    from trtllm_autojudge.mining.run import merge_shards, shard_path

    out = tmp_path / "labels.jsonl"
    rec = lambda pid: {"id": pid, "prompt_ids": [1], "final_ids": [1, 2], "labels": [[1, 0, 2, 3]]}  # noqa: E731
    out.write_text("".join(json.dumps(rec(p)) + "\n" for p in ("a", "b", "c")))
    shard_path(out, 1, 2).write_text(json.dumps(rec("d")) + "\n")
    merge_shards(out, 2, ["d", "b"])
    assert [r["id"] for r in read_records(out)[0]] == ["d", "b", "a", "c"]


def test_corrupt_line_is_reported_and_the_rest_kept(tmp_path):
    path = tmp_path / "labels.jsonl"
    good = {"id": "a", "prompt_ids": [1], "final_ids": [1, 2], "labels": [[1, 0, 2, 3]]}
    path.write_text(json.dumps(good) + "\n{not json\n" + json.dumps(dict(good, id="b")) + "\n")
    records, problems = read_records(path, warn=False)
    assert [r["id"] for r in records] == ["a", "b"]
    assert len(problems) == 1 and ":2:" in problems[0] and "corrupt" in problems[0]
    assert unimportant_map(records) == {(1,): {3}}


def test_a_gzip_label_set_reads_back_the_same_records_and_bytes(tmp_path):
    from trtllm_autojudge.mining.store import write_gzip

    records = [{"id": p, "prompt_ids": [1], "final_ids": [1, 2, k], "labels": [[1, k % 2, 2, 3]]} for k, p in enumerate("abc")]
    write_gzip(tmp_path / "x.jsonl.gz", records)
    write_gzip(tmp_path / "y.jsonl.gz", records)
    assert read_records(tmp_path / "x.jsonl.gz")[0] == records
    assert (tmp_path / "x.jsonl.gz").read_bytes() == (tmp_path / "y.jsonl.gz").read_bytes()  # no timestamp inside


MPI_SCRIPT = HERE / "mpi_mine_tiny.py"



def test_two_mpi_ranks_equal_one(tmp_path):
    """The fast miner under mpirun -n 2 (rank 0 merges) gives the plain miner's labels at 1 rank."""
    one, two = tmp_path / "one.jsonl", tmp_path / "two.jsonl"
    subprocess.run([sys.executable, str(MPI_SCRIPT), str(one), "plain"], check=True, timeout=300)
    env = dict(os.environ, OMPI_MCA_rmaps_base_oversubscribe="1")
    subprocess.run([*mpirun(), "-n", "2", sys.executable, str(MPI_SCRIPT), str(two), "fast"], check=True, timeout=300,
                   env=env)
    a, b = one.read_text().splitlines(), two.read_text().splitlines()
    assert len(a) == 6 and [json.loads(x)["labels"] for x in a] == [json.loads(x)["labels"] for x in b]
    assert [json.loads(x)["id"] for x in b] == [f"p{i}" for i in range(6)]  # merged in prompt order
    assert sum(len(json.loads(x)["labels"]) for x in a) > 6
    assert (tmp_path / "two.jsonl.rank1-of-2").exists()


def test_batched_mining_equals_plain_algorithm_in_float64():
    target, draft = tiny_pair(seed=3, dtype=torch.float64)
    checker = KeyTokens(window=10)
    config = MiningConfig(max_new_tokens=24)
    plain = LabelMiner(target, draft, checker, decode, MiningConfig(24, early_stop=False, reuse_cache=False))
    fast = LabelMiner(target, draft, checker, decode, config)
    prompts = [(pid, p[: 2 + i % 4], None) for i, (pid, p, _) in enumerate(tiny_prompts(7, seed=4))]  # ragged
    got = {}
    FastLabelMiner(target, draft, checker, decode, TransformersRegenerator(target), config, batch_size=3).mine_many(
        prompts, lambda r: got.update({r["id"]: r}))
    assert sorted(got) == sorted(pid for pid, _, _ in prompts)
    for pid, prompt, _ in prompts:
        ref = plain.mine(prompt)
        assert got[pid]["labels"] == ref["labels"] and got[pid]["alt_answers"] == ref["alt_answers"]
        assert got[pid]["final_ids"] == fast.mine(prompt)["final_ids"]  # both stop once the answer is fixed


def test_time_budget_stops_starting_prompts(pair, tmp_path):
    target, draft = pair
    miner = LabelMiner(target, draft, KeyTokens(window=8), decode, MiningConfig(max_new_tokens=12))
    prompts = tiny_prompts(4, seed=6)
    out = tmp_path / "budget.jsonl"
    assert mine_prompts(miner, prompts, out, progress=False, max_minutes=0)["prompts"] == 0
    assert mine_prompts(miner, prompts, out, progress=False)["prompts"] == 4  # the rerun does the rest


def test_mined_records_keep_their_template(tmp_path):
    """The template split (train --split-by template) needs each record's template: mine_prompts
    writes the example's template_id (None for user data)."""
    from trtllm_autojudge.mining.run import mine_prompts
    from trtllm_autojudge.mining.store import read_records

    class Stub:
        def mine_many(self, items, on_record):
            for pid, prompt, example in items:
                on_record({"id": pid, "prompt_ids": prompt, "final_ids": prompt, "labels": [], "cost": {}})

    out = tmp_path / "labels.jsonl"
    mine_prompts(Stub(), [("a", [1], {"template_id": 7}), ("b", [2], {"template_id": None}), ("c", [3], None)], out,
                 progress=False)
    assert [(r["id"], r["template"]) for r in read_records(out)[0]] == [("a", 7), ("b", None), ("c", None)]

"""experiments/eagle_alpha.py on the toy task: alpha per depth over the target's greedy responses,
the same from an eval folder's lossless runs as decoded in place, and the expected chain lengths."""
import json
import runpy
from pathlib import Path

import numpy as np
import pytest
import torch

import toy_task
from eagle_heads import first_layer_head
from tiny_models import tiny_pair
from trtllm_autojudge.decoding.eagle_drafter import EagleDrafter
from trtllm_autojudge.decoding.speculative import greedy_generate
from trtllm_autojudge.mining.cli import problem_id
from trtllm_autojudge.models.eagle_training import alpha_counts, chain_lengths

SCRIPT = str(Path(__file__).resolve().parents[1] / "experiments" / "eagle_alpha.py")
NEW = 12


@pytest.fixture()
def script(monkeypatch):
    target, _ = tiny_pair(seed=3)
    drafter = EagleDrafter(target, first_layer_head(target))
    namespace = runpy.run_path(SCRIPT)
    monkeypatch.setitem(namespace["main"].__globals__, "load_pair", lambda args, task: (target, drafter, None))
    return namespace, target, drafter


def test_alpha_counts_every_chain_of_the_greedy_responses(script, tmp_path):
    namespace, target, drafter = script
    task = toy_task.ToyTask()
    out = tmp_path / "alpha.json"
    assert namespace["main"](["--task", "toy_task:ToyTask", "--max-new-tokens", str(NEW), "--depth", "3",
                              "--out", str(out)]) == 0
    result = json.loads(out.read_text())
    counts = np.zeros((3, 2), np.int64)
    runs = []
    for p in task.problems("eval", False, 0, 0):
        prompt = task.prompt_ids(None, p.question)
        response = greedy_generate(target, prompt, NEW)
        runs.append({"spec": "lossless", "qid": problem_id(p.question), "tokens": response})
        ids = prompt + response
        hidden = target.model.model(input_ids=torch.tensor([ids])).last_hidden_state[0].detach()
        counts += alpha_counts(*chain_lengths(drafter.head, target.model.lm_head, ids, len(prompt), hidden, 3), len(ids), 3)
    assert [[d["right"], d["tried"]] for d in result["depths"]] == counts.tolist()
    assert result["responses_decoded_here"] == 3 and result["questions"] == 3
    first = result["depths"][0]
    assert first["interval"][0] <= first["alpha"] <= first["interval"][1]
    a = [d["alpha"] or 0.0 for d in result["depths"]]
    assert result["expected_tokens_per_chain_cycle"]["2"] == pytest.approx(1 + a[0] + a[0] * a[1], abs=2e-3)
    (tmp_path / "runs.jsonl").write_text("".join(json.dumps(r) + "\n" for r in runs))
    again = tmp_path / "again.json"
    namespace["main"](["--task", "toy_task:ToyTask", "--depth", "3", "--responses", str(tmp_path / "runs.jsonl"),
                       "--out", str(again)])
    from_runs = json.loads(again.read_text())
    assert from_runs["depths"] == result["depths"] and from_runs["responses_decoded_here"] == 0


def test_a_draft_model_is_refused(monkeypatch):
    namespace = runpy.run_path(SCRIPT)
    target, draft = tiny_pair(seed=3)
    monkeypatch.setitem(namespace["main"].__globals__, "load_pair", lambda args, task: (target, draft, None))
    with pytest.raises(SystemExit, match="give an EAGLE head"):
        namespace["main"](["--task", "toy_task:ToyTask"])

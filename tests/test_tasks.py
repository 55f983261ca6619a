"""Tasks: the checkers (GSM8K, program, code) with right, wrong, crashing, timing-out and hostile
inputs; the registry; --task routing through every verb; lossless == greedy and kill/resume on
the program task with the tiny random pair."""
from __future__ import annotations

import json
import os
import runpy
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import toy_task
from program_text import decode_program, program_prompts
from tiny_models import tiny_pair
from trtllm_autojudge.cli import main as cli
from trtllm_autojudge.decoding.modes import JudgeRule
from trtllm_autojudge.decoding.speculative import greedy_generate
from trtllm_autojudge.decoding.tree import DraftTree
from trtllm_autojudge.evaluation.methods import OperatingPoint
from trtllm_autojudge.evaluation.runner import Question, run_points
from trtllm_autojudge.judge.dataset import FeatureSet
from trtllm_autojudge.judge.head import JudgeHead, feature_dim
from trtllm_autojudge.mining.miner import LabelMiner, MiningConfig
from trtllm_autojudge.mining.run import mine_prompts
from trtllm_autojudge.tasks import BUILTIN_TASKS, Gsm8kCotTask, Gsm8kProgramTask, load_task
from trtllm_autojudge.tasks.checkers import FAILURE_ANSWERS, CodeChecker, GSM8KChecker, ProgramChecker
from trtllm_autojudge.tasks.sandbox import Sandbox

HERE = Path(__file__).parent
REPO = HERE.parent


# ---- GSM8K checker ----

@given(st.text(max_size=40), st.sampled_from(["#### 1,234\n", "#### .\n", "#### -\n", "#### 5 ", "####\n"]),
       st.text(max_size=40))
def test_gsm8k_final_answer_cannot_change(prefix, line, suffix):
    """Whatever comes after a text that is_final calls final leaves its answer as it is."""
    checker = GSM8KChecker()
    text = prefix + line
    if checker.is_final(text):
        assert checker.answer(text + suffix) == checker.answer(text)


def test_gsm8k_a_first_answer_line_without_a_digit_fixes_nothing():
    """'#### .' is no answer: the answer falls back to the last number, which later text changes,
    so the text is not final (mining would otherwise stop, and label, on an answer still open)."""
    checker = GSM8KChecker()
    assert checker.is_final("#### 1,234\n") and checker.is_final("so 5 #### 7\n and 9")
    text = "it is 5 #### .\n"
    assert not checker.is_final(text)
    assert checker.answer(text) == "5" and checker.answer(text + " then 9") == "9"


def test_gsm8k_is_final_waits_for_the_whole_number():
    checker = GSM8KChecker()
    assert not checker.is_final("so #### 12")
    assert not checker.is_final("so #### 12.")
    assert checker.is_final("so #### 12\n")
    assert checker.same(None, None) and not checker.same("3", None) and checker.same("3.0", "3")


# ---- program checker ----

@pytest.fixture(scope="module")
def programs():
    checker = ProgramChecker(timeout_s=1.0, memory_mb=256)
    yield checker
    checker.sandbox.close()


@pytest.mark.parametrize("program,answer", [
    ("x = 3\ny = 4\nv1 = x * y\nanswer = v1 + 1", "13"),  # right
    ("x = 3\ny = 4\nanswer = x - y", "-1"),
    ("answer = 7 / 2", "3.5"),
    ("answer = 0.1 + 0.2", "0.3"),  # float noise is canonicalised like the gold answers
    ("answer = 12.0", "12"),
    ("from fractions import Fraction\nanswer = Fraction(9, 3)", "3"),
    ("import math\nanswer = math.floor(2.7)", "2"),
    ("```python\nanswer = 5\n```\nThat is all.", "5"),  # a fenced block is the program
    ("answer = (", FAILURE_ANSWERS["syntax"]),
    ("answer = 1 / 0", FAILURE_ANSWERS["exception"]),
    ("answer = undefined_name", FAILURE_ANSWERS["exception"]),
    ("x = 1", FAILURE_ANSWERS["no-answer"]),
    ("answer = 'twelve'", FAILURE_ANSWERS["not-a-number"]),
    ("answer = float('inf')", FAILURE_ANSWERS["not-a-number"]),
    ("answer = True", FAILURE_ANSWERS["not-a-number"]),
])
def test_program_answers(programs, program, answer):
    assert programs.answer(program) == answer


def test_wrong_and_right_programs_compare_like_answers(programs):
    right, wrong = programs.answer("answer = 6 * 3"), programs.answer("answer = 6 + 3")
    assert programs.same(right, "18") and not programs.same(wrong, "18")
    assert programs.same(programs.answer("answer = ("), programs.answer("answer = )"))  # both fail to compile
    assert not programs.same(programs.answer("answer = ("), programs.answer("answer = 1 / 0"))
    assert not any(programs.same(f, "0") for f in FAILURE_ANSWERS.values())


HOSTILE = {
    "infinite loop": ("while True:\n    pass\nanswer = 1", FAILURE_ANSWERS["timeout"]),
    "10 GB allocation": ("x = [0] * (10 * 2**30 // 8)\nanswer = 1", FAILURE_ANSWERS["exception"]),
    "10 GB string": ("x = 'x' * (10 * 2**30)\nanswer = 1", FAILURE_ANSWERS["exception"]),
    "import socket": ("import socket\nsocket.create_connection(('127.0.0.1', 9))\nanswer = 1", FAILURE_ANSWERS["exception"]),
    "import subprocess": ("import subprocess\nsubprocess.run(['true'])\nanswer = 1", FAILURE_ANSWERS["exception"]),
    "os.system through a builtin's globals": (
        "c = [k for k in ().__class__.__base__.__subclasses__() if k.__name__ == '_wrap_close'][0]\n"
        "os = c.__init__.__globals__['sys'].modules['os']\nos.system('touch {outside}')\nanswer = 1",
        FAILURE_ANSWERS["exception"]),
    "fork through a builtin's globals": (
        "c = [k for k in ().__class__.__base__.__subclasses__() if k.__name__ == '_wrap_close'][0]\n"
        "os = c.__init__.__globals__['sys'].modules['os']\nos.fork()\nanswer = 1", FAILURE_ANSWERS["exception"]),
    "write outside its directory": (
        "c = [k for k in ().__class__.__base__.__subclasses__() if k.__name__ == '_wrap_close'][0]\n"
        "io = c.__init__.__globals__['sys'].modules['io']\nio.open('{outside}', 'w').write('x')\nanswer = 1",
        FAILURE_ANSWERS["exception"]),
    "print 100 MB": ("for i in range(100):\n    print('x' * 2**20)\nanswer = 7", "7"),
    "no answer": ("x = 41 + 1", FAILURE_ANSWERS["no-answer"]),
}


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_hostile_programs_are_contained(programs, case, tmp_path):
    outside = tmp_path / "escaped"
    program, answer = HOSTILE[case]
    t0 = time.perf_counter()
    assert programs.answer(program.format(outside=outside)) == answer
    assert time.perf_counter() - t0 < 5.0  # the limits hold: 1 s of wall clock, then the process group dies
    assert not outside.exists()
    assert programs.answer("answer = 2 + 2") == "4"  # the worker still serves


def test_worker_killed_from_outside_is_restarted():
    sandbox = Sandbox(timeout_s=1.0)
    assert sandbox.run("answer = 1").value == "1"
    os.kill(sandbox._proc.pid, 9)
    sandbox._proc.wait()
    assert sandbox.run("answer = 2").value == "2"
    sandbox.close()


def test_threads_sharing_a_sandbox_get_their_own_answers():
    """eval --batch decodes questions in threads that share the task's sandbox: each run's reply is its own."""
    sandbox = Sandbox(timeout_s=2.0)
    got = {}

    def one(i):
        got[i] = [sandbox.run(f"x = sum(range({i % 3} * 100000))\nanswer = {i} * 7 + {j}").value for j in range(5)]

    threads = [threading.Thread(target=one, args=(i,)) for i in range(8)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(timeout=60)
    sandbox.close()
    assert got == {i: [str(i * 7 + j) for j in range(5)] for i in range(8)}


def test_sandbox_rejects_bad_limits_and_modes():
    with pytest.raises(ValueError, match="limits too small"):
        Sandbox(timeout_s=0)
    with pytest.raises(ValueError, match="unknown sandbox mode"):
        Sandbox().run("x = 1", mode="eval")


def test_generated_programs_pass_the_checker(programs):
    """The training programs themselves, run in the sandbox, give their gold answers."""
    problems = Gsm8kProgramTask().problems("train", originals=False, variants_per_template=1, seed=2)[:30]
    assert all(programs.answer(p.answer) == p.gold for p in problems)


# ---- code checker ----

def test_code_checker_sandbox(tmp_path):
    checker = CodeChecker(timeout_s=2)
    tests = "assert add(2, 3) == 5"
    assert checker.answer("```python\ndef add(a, b):\n    return a + b\n```", {"tests": tests}) == "pass"
    assert checker.answer("```python\ndef add(a, b):\n    return a - b\n```", {"tests": tests}) == "fail"
    assert checker.answer("def add(a, b):\n    while True: pass", {"tests": tests}) == "fail"  # killed on timeout
    net = "import socket\ndef add(a, b):\n    socket.create_connection(('127.0.0.1', 9))\n    return a + b"
    assert checker.answer(net, {"tests": tests}) == "fail"
    cheat = "import os\nos._exit(0)"  # exiting before the tests does not pass them
    assert checker.answer(cheat, {"tests": tests}) == "fail"
    outside = tmp_path / "escaped"
    writer = f"open({str(outside)!r}, 'w').write('x')\ndef add(a, b):\n    return a + b"
    assert checker.answer(writer, {"tests": tests}) == "fail" and not outside.exists()
    local = "open('scratch.txt', 'w').write('ok')\nimport json, unittest\ndef add(a, b):\n    return a + b"
    assert checker.answer(local, {"tests": tests}) == "pass"  # its own directory and the standard library are usable
    with pytest.raises(ValueError, match="tests"):
        checker.answer("x", {})
    checker.sandbox.close()


# ---- the registry ----

def test_load_task_by_name_and_path():
    assert sorted(BUILTIN_TASKS) == ["code", "gsm8k-cot", "gsm8k-program", "gsm8k-program-words"]
    assert load_task("gsm8k-cot").checker.name == "gsm8k"
    assert load_task("gsm8k-program").checker.name == "program"
    words = load_task("gsm8k-program-words")  # the program task, commented in words only
    assert words.checker.name == "program" and words.shipped_draft_vocab == load_task("gsm8k-program").shipped_draft_vocab
    assert [p.question for p in words.problems("train", False, 1, 3)] == [p.question for p in load_task("gsm8k-program").problems("train", False, 1, 3)]
    assert not any(c.isdigit() for p in words.problems("train", False, 1, 3) for ln in p.answer.splitlines() if ln.startswith("#") for c in ln)
    assert load_task("toy_task:ToyTask").name == "toy"
    with pytest.raises(ValueError, match="unknown task"):
        load_task("nope")
    with pytest.raises(ValueError, match="cannot load task"):
        load_task("toy_task:Missing")
    with pytest.raises(ValueError, match="subclass trtllm_autojudge.tasks.Task"):
        load_task("toy_task:ToyTokenizer")


def test_training_split_questions_are_held_out_by_text():
    """eval/bench on ``--split train`` drop every question the shipped adapter or draft was trained
    on (by text), and only those; the cot adapter was trained on 20 variants per template with seed 0."""
    import argparse

    from trtllm_autojudge.data.sources import load_problems

    task = Gsm8kCotTask()
    seen = task.trained_questions()
    assert {p.question for p in task.problems("train", False, 20, 0)} <= seen
    for seed in (0, 1000):
        args = argparse.Namespace(questions=None, split="train", originals=False, variants_per_template=2, seed=seed, limit=None)
        everything = task.problems("train", False, 2, seed)
        try:
            kept = load_problems(args, task, held_out=True)  # eval, bench
        except SystemExit:
            kept = []
        assert [p for p in everything if p.question not in seen] == kept
        assert load_problems(args, task) == everything  # mining may use training questions
    assert not any(p.question in seen for p in kept) and len(kept) > 100  # seed 1000: fresh variants stay


def test_judge_files_record_their_mined_questions(tmp_path):
    """make_judge.py writes the mined questions' settings into the judge; held-out sets read them."""
    from trtllm_autojudge.tasks.base import _training_settings

    head = JudgeHead(np.zeros(2), np.zeros(2), np.ones(2), 0.0, "DT", 2, 2, 0.5, meta={"task": "x"})
    head.save(tmp_path / "plain.safetensors")
    assert _training_settings(tmp_path / "plain.safetensors") == [] and _training_settings(tmp_path / "absent") == []
    head.meta["settings"] = {"split": "train", "per_template": 3, "seed": 7}
    head.save(tmp_path / "mined.safetensors")
    assert [s["seed"] for s in _training_settings(tmp_path / "mined.safetensors")] == [7]


def test_continued_adapters_keep_the_questions_of_the_adapter_they_continued(tmp_path):
    """train_target_adapter.py --init-adapter records the continued adapter's settings under "init"."""
    import torch
    from safetensors.torch import save_file

    from trtllm_autojudge.tasks.base import _training_settings

    settings = {"per_template": 40, "seed": 0, "init": {"file": "a.safetensors", "per_template": 80, "seed": 3, "init": None}}
    save_file({"x": torch.zeros(1)}, str(tmp_path / "b.safetensors"), metadata={"settings": json.dumps(settings)})
    assert [(s["per_template"], s["seed"]) for s in _training_settings(tmp_path / "b.safetensors")] == [(40, 0), (80, 3)]


def test_removed_checker_flag_says_what_to_use(capsys):
    with pytest.raises(SystemExit) as exc:
        cli(["mine", "--out", "x.jsonl", "--checker", "gsm8k"])
    assert exc.value.code == 2 and "--checker was replaced by --task" in capsys.readouterr().err


def test_cot_task_keeps_todays_prompt_and_response():
    from trtllm_autojudge.data import original_problems, prompt_ids, training_ids
    from trtllm_autojudge.models.embedded import load_tokenizer

    tokenizer, task = load_tokenizer(), Gsm8kCotTask()
    problem = original_problems("train")[0]
    assert task.prompt_ids(tokenizer, problem.question) == prompt_ids(tokenizer, problem.question)
    assert task.training_ids(tokenizer, problem) == training_ids(tokenizer, problem.question, problem.answer)
    program = Gsm8kProgramTask()
    variant = program.problems("train", originals=False, variants_per_template=1, seed=0)[0]
    ids, n_prompt = program.training_ids(tokenizer, variant)
    assert tokenizer.decode(ids[n_prompt:]).startswith(variant.answer) and "Python program" in tokenizer.decode(ids[:n_prompt])
    with pytest.raises(ValueError, match="no program"):
        program.response_text(problem)


# ---- --task through every verb ----

@pytest.fixture()
def toy_verbs(monkeypatch, tmp_path):
    """Every verb's load_pair gives the tiny pair and a token-id tokenizer; a tiny judge file exists."""
    target, draft = tiny_pair(seed=3)

    def load_pair(args, task):
        assert isinstance(task, toy_task.ToyTask), "the verb must load the models for the task it was given"
        return target, draft, toy_task.ToyTokenizer()

    for module in ("trtllm_autojudge.mining.cli", "trtllm_autojudge.mining.features_cli", "trtllm_autojudge.evaluation.cli",
                   "trtllm_autojudge.evaluation.calibrate", "trtllm_autojudge.demo", "trtllm_autojudge.generate"):
        monkeypatch.setattr(f"{module}.load_pair", load_pair)
    F = feature_dim("DT", draft.hidden_size, target.hidden_size)
    judge = tmp_path / "judge.safetensors"
    JudgeHead(0.05 * np.random.default_rng(0).normal(size=F), np.zeros(F), np.ones(F), -0.5, "DT", draft.hidden_size,
              target.hidden_size, 0.5).save(judge)
    toy_task.CALLS.clear()
    return tmp_path, judge


TOY = ["--task", "toy_task:ToyTask"]


def _used_toy():
    used = set(toy_task.CALLS)
    toy_task.CALLS.clear()
    return used


def test_task_routes_through_mine_and_features(toy_verbs):
    tmp, _ = toy_verbs
    assert cli(["mine", *TOY, "--out", str(tmp / "labels.jsonl"), "--max-new-tokens", "8"]) == 0
    assert _used_toy() == {"problems", "prompt_ids", "answer"}
    records = [json.loads(x) for x in (tmp / "labels.jsonl").read_text().splitlines()]
    assert [r["prompt_ids"][0] for r in records] == [3, 4, 5]  # the toy task's prompts
    assert cli(["features", *TOY, "--labels", str(tmp / "labels.jsonl"), "--out", str(tmp / "f.safetensors")]) == 0
    assert FeatureSet.load(tmp / "f.safetensors").task == "toy"


def test_mine_regenerator_lookup_draft_routes(toy_verbs, monkeypatch):
    """`mine --regenerator lookup-draft` builds the draft-arbitrated lookup backend and mines every prompt."""
    import trtllm_autojudge.mining.cli as mine_cli

    tmp, _ = toy_verbs
    built = []
    real = mine_cli.local_regenerator
    monkeypatch.setattr(mine_cli, "local_regenerator", lambda *a: built.append(real(*a)) or built[-1])
    out = tmp / "labels_ld.jsonl"
    assert cli(["mine", *TOY, "--out", str(out), "--max-new-tokens", "8", "--regenerator", "lookup-draft"]) == 0
    (regenerator,) = built
    assert regenerator.drafter is not None and regenerator.draft_forwarded > 0
    assert [json.loads(x)["prompt_ids"][0] for x in out.read_text().splitlines()] == [3, 4, 5]


def test_mine_regenerator_lookup_batched_routes(toy_verbs, monkeypatch):
    """`mine --regenerator lookup --batch-size 2` builds the batched backend verifying looked-up windows;
    `lookup-draft` with a batch is refused with what to change."""
    import trtllm_autojudge.mining.cli as mine_cli
    from trtllm_autojudge.generation.regen_transformers import TransformersRegenerator

    tmp, _ = toy_verbs
    built = []
    real = mine_cli.local_regenerator
    monkeypatch.setattr(mine_cli, "local_regenerator", lambda *a: built.append(real(*a)) or built[-1])
    out = tmp / "labels_lb.jsonl"
    assert cli(["mine", *TOY, "--out", str(out), "--max-new-tokens", "8", "--regenerator", "lookup",
                "--batch-size", "2", "--speculation-depth", "1", "--lookup-windows", "3:16"]) == 0
    (regenerator,) = built
    assert isinstance(regenerator, TransformersRegenerator) and (regenerator.lookup.min_window, regenerator.lookup.max_window) == (3, 16)
    assert regenerator.forward_calls > 0
    with pytest.raises(SystemExit, match="--lookup-windows '16:3': give MIN:MAX"):
        cli(["mine", *TOY, "--out", str(out), "--regenerator", "lookup", "--lookup-windows", "16:3"])
    assert sorted(json.loads(x)["prompt_ids"][0] for x in out.read_text().splitlines()) == [3, 4, 5]
    with pytest.raises(SystemExit, match="mine: the lookup-draft regenerator serves one prompt at a time"):
        cli(["mine", *TOY, "--out", str(tmp / "x.jsonl"), "--regenerator", "lookup-draft", "--batch-size", "2"])


def test_task_routes_through_eval_bench_demo_generate(toy_verbs, capsys):
    tmp, judge = toy_verbs
    common = ["--max-new-tokens", "8", "--k", "2", "--judge", str(judge)]
    assert cli(["eval", *TOY, *common, "--out-dir", str(tmp / "eval"), "--thresholds", "0.5", "--baselines", "topk@2"]) == 0
    assert _used_toy() == {"problems", "prompt_ids", "answer"}
    meta = json.loads((tmp / "eval" / "summary.json").read_text())["meta"]
    assert meta["task"] == "toy" and meta["k"] == 2 and meta["question_set"]["recipe"].startswith("--split eval")
    assert meta["command"].startswith("trtllm-autojudge eval --task toy_task:ToyTask")
    head = JudgeHead.load(judge)
    assert meta["judge"] == {"file": str(judge), **json.loads(json.dumps(head.describe()))}
    assert meta["judge"]["fingerprint"] == head.fingerprint() and meta["judge"]["setup"] == head.setup
    assert cli(["bench", *TOY, *common, "--repeats", "1", "--out", str(tmp / "bench.json"),
                "--compare-judge", str(judge)]) == 0
    bench = json.loads((tmp / "bench.json").read_text())
    assert {"problems", "prompt_ids"} <= _used_toy() and bench["task"] == "toy"
    assert [j["file"] for j in bench["judges"].values()] == [str(judge), str(judge)]
    assert {j["fingerprint"] for j in bench["judges"].values()} == {head.fingerprint()}
    assert set(bench["step_costs"]["verify_s"]) == {"2"}  # a chain of --k 2: the speed model's step costs
    assert cli(["demo", *TOY, "--questions", "2", "--max-new-tokens", "8", "--k", "2", "--judge", str(judge),
                "--out-dir", str(tmp / "demo")]) == 0
    assert _used_toy() == {"problems", "prompt_ids", "answer"}
    assert json.loads((tmp / "demo" / "summary.json").read_text())["meta"]["task"] == "toy"
    capsys.readouterr()
    assert cli(["generate", "q1", *TOY, "--mode", "lossless", "--max-new-tokens", "8", "--k", "2"]) == 0
    assert _used_toy() == {"prompt_ids", "answer"} and "[toy] answer:" in capsys.readouterr().out


def test_task_routes_through_calibrate(toy_verbs, capsys):
    """calibrate runs the task's questions, writes the judge with the certified threshold and its
    certificate, and resumes from its runs; eval prints the certificate and refuses the calibration
    questions; too few questions for a budget, and a budget that is not a share, are refused."""
    tmp, judge = toy_verbs
    out, common = tmp / "calibrated.safetensors", ["--max-new-tokens", "8", "--k", "2", "--judge", str(judge),
                                                   "--out-dir", str(tmp / "cal")]
    budgets = ["--max-answer-change", "0.65", "--max-gold-drop", "0.65",  # 0 of 3 questions bound a share at 63%
               "--answer-budgets", "0.5,0.65"]  # the ladder: 0.5 is beyond 3 questions, 0.65 certifies
    # threshold 0 accepts no mismatch (sigmoid >= 0 rejects), so it is lossless: 0 changed, certified
    assert cli(["calibrate", *TOY, *common, *budgets, "--thresholds", "0", "--out", str(out)]) == 0
    assert "calibrate: 3 questions; within the budgets at 95%, at most 0 answers changed and 0 gold losses (the " \
           "default threshold); the ladder's budgets 0.5 (needs 5 questions), 0.65 (0 changed); candidates 0, from the " \
           "smallest up until every budget has failed" in capsys.readouterr().out
    assert {"problems", "prompt_ids", "answer"} <= _used_toy()
    head, record = JudgeHead.load(out), json.loads((tmp / "cal" / "calibration.json").read_text())
    assert head.threshold == 0.0 == record["chosen"]
    assert head.meta["calibration"]["label_threshold"] == JudgeHead.load(judge).threshold == 0.5
    (row,) = record["candidates"]
    assert row["spec"] == "judge@0" and row["agreement"] == 1.0 and row["certified"] and row["answers_changed"] == 0
    assert row["tokens_per_cycle"] == record["lossless"]["tokens_per_cycle"]
    assert record["judge"]["fingerprint"] == JudgeHead.load(judge).fingerprint() != head.fingerprint()
    assert (tmp / "cal" / "frontier.png").stat().st_size > 0
    cert = head.describe()["certificate"]
    assert (cert["questions"], cert["answers_changed"], cert["max_answer_change"], cert["threshold"]) == (3, 0, 0.65, 0.0)
    assert cert["answer_change_bound"] == pytest.approx(1 - 0.05 ** (1 / 3)) and cert["dtype"] == "float32"
    assert cert["k"] == 2 and cert["max_new_tokens"] == 8 and len(cert["pair"]) == 33
    assert len(head.meta["certificate"]["question_ids"]) == 3
    assert [(r["budget"], r["threshold"]) for r in cert["ladder"]] == [(0.5, None), (0.65, 0.0)] == \
        [(r["budget"], r["threshold"]) for r in record["ladder"]]
    runs = (tmp / "cal" / "runs.jsonl").read_text()
    assert cli(["calibrate", *TOY, *common, *budgets, "--thresholds", "0", "--out", str(out)]) == 0
    assert (tmp / "cal" / "runs.jsonl").read_text() == runs  # resumed: nothing decoded again
    again = tmp / "again.safetensors"
    with pytest.raises(SystemExit, match="holds runs of another setup: judge_threshold 0.5 \\(now 0.0\\)"):
        cli(["calibrate", *TOY, *common[:-4], *budgets, "--judge", str(out), "--out-dir", str(tmp / "cal"),
             "--thresholds", "0", "--out", str(again)])  # the folder's point "judge" ran at the other default
    assert cli(["calibrate", *TOY, *common[:-4], *budgets, "--judge", str(out), "--out-dir", str(tmp / "cal2"),
                "--thresholds", "0", "--out", str(again)]) == 0
    assert JudgeHead.load(again).meta["calibration"]["label_threshold"] == 0.5  # not the calibrated 0
    limited = tmp / "limited.safetensors"  # a per-response limit becomes part of the certified default
    assert cli(["calibrate", *TOY, *common, *budgets, "--thresholds", "0", "--max-judged", "1", "--out", str(limited)]) == 0
    head = JudgeHead.load(limited)
    assert head.meta["max_judged"] == 1 == head.meta["certificate"]["max_judged"]
    assert JudgeRule.at_default(head).max_judged == 1 and JudgeRule(head).max_judged is None
    assert "max_judged" not in JudgeHead.load(again).meta
    capsys.readouterr()
    # eval on the calibration questions is refused before any model loads; the certificate prints elsewhere
    with pytest.raises(SystemExit, match="eval: 3 of the 3 questions are calibration questions"):
        cli(["eval", *TOY, "--split", "train", "--max-new-tokens", "8", "--k", "2", "--judge", str(out), "--thresholds",
             "0", "--baselines", "", "--out-dir", str(tmp / "ev")])
    with pytest.raises(SystemExit, match="need at least 299 calibration questions .* got 3"):
        cli(["calibrate", *TOY, *common, "--thresholds", "0", "--out", str(out)])
    with pytest.raises(SystemExit):
        cli(["calibrate", *TOY, *common, "--max-answer-change", "5", "--out", str(out)])
    assert "--max-answer-change is a share of the questions" in capsys.readouterr().err


def test_answer_budget_picks_the_certified_rung_and_refuses_what_is_not_certified(toy_verbs, capsys):
    """generate, eval and bench take --answer-budget: the threshold of the judge's certified ladder
    for that budget, at the settings it was certified under; any other budget, K, or a file without a
    certificate is refused with what it does certify."""
    tmp, judge = toy_verbs
    out = tmp / "laddered.safetensors"
    common = ["--max-new-tokens", "8", "--k", "2"]
    assert cli(["calibrate", *TOY, *common, "--judge", str(judge), "--out-dir", str(tmp / "cal"), "--thresholds",
                "0,0.3", "--max-answer-change", "0.65", "--max-gold-drop", "0.65", "--answer-budgets", "0.5,0.65,0.9",
                "--out", str(out)]) == 0
    rungs = {r["budget"]: r["threshold"] for r in JudgeHead.load(out).meta["certificate"]["ladder"]}
    assert rungs[0.5] is None and rungs[0.65] is not None and rungs[0.9] is not None
    capsys.readouterr()
    assert cli(["generate", "q4", *TOY, *common, "--judge", str(out), "--answer-budget", "0.9"]) == 0
    assert "[judge] " in capsys.readouterr().out
    questions = tmp / "report.jsonl"
    questions.write_text('{"question": "q6", "answer": "0"}\n{"question": "q7", "answer": "0"}\n')
    assert cli(["eval", *TOY, *common, "--questions", str(questions), "--judge", str(out), "--answer-budget", "0.9",
                "--baselines", "", "--out-dir", str(tmp / "ev")]) == 0
    summary = json.loads((tmp / "ev" / "summary.json").read_text())
    assert [r["spec"] for r in summary["rows"]] == ["lossless", f"judge@{rungs[0.9]:g}"]
    assert "it applies to this run's" in capsys.readouterr().out
    refusals = [
        (["--answer-budget", "0.5"], r"certifies the answer budgets 0.65 \(threshold .*\), 0.9 .*not 0.5; no threshold "
                                     r"was certified within 0.5: give one of those"),
        (["--answer-budget", "0.02"], "certifies the answer budgets 0.65 .* not 0.02"),
        (["--answer-budget", "1.5"], r"give a number in \(0, 1\)"),
        (["--answer-budget", "0.9", "--k", "3"], r"holds for toy, float32, K = 2, 8 new tokens, not for this run \(k 3 "
                                                 r"\(certified: 2\)\)"),
        (["--answer-budget", "0.9", "--judge", str(judge)], "this judge file has no certificate"),
    ]
    for extra, message in refusals:
        with pytest.raises(SystemExit, match=message):
            cli(["generate", "q4", *TOY, *common, "--judge", str(out), *extra])
    with pytest.raises(SystemExit, match="certifies the answer budgets 0.65 .* not 0.02"):
        cli(["eval", *TOY, *common, "--questions", str(questions), "--judge", str(out), "--answer-budget", "0.02",
             "--out-dir", str(tmp / "ev2")])
    with pytest.raises(SystemExit):
        cli(["generate", "q4", *TOY, *common, "--judge", str(out), "--answer-budget", "0.9", "--mode", "topk@2"])
    assert "use it with --mode judge, not 'topk@2'" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        cli(["bench", *TOY, *common, "--judge", str(out), "--answer-budget", "0.9", "--threshold", "0.3"])
    assert "--threshold and --answer-budget both set the AutoJudge threshold" in capsys.readouterr().err
    assert cli(["bench", *TOY, *common, "--judge", str(out), "--answer-budget", "0.9", "--repeats", "1"]) == 0


def test_task_routes_through_make_judge(toy_verbs):
    tmp, _ = toy_verbs
    main = runpy.run_path(str(REPO / "build_scripts" / "make_judge.py"), run_name="make_judge")["main"]
    verbs = []

    def fake_cli(argv):  # mine and features really run; training is not this test's subject
        verbs.append(argv)
        return cli(argv) if argv[0] in ("mine", "features") else 1

    main.__globals__["cli"] = fake_cli
    with pytest.raises(SystemExit, match="training DT failed"):
        main(["--work", str(tmp / "work"), *TOY, "--no-install", "--setups", "DT,DT-LS", "--max-new-tokens", "8",
              "--max-important-accept", "0.03"])
    assert [v[0] for v in verbs] == ["mine", "features", "train"]
    assert verbs[2][verbs[2].index("--max-important-accept") + 1] == "0.03"  # the default threshold's rule
    assert all(v[v.index("--task") + 1] == "toy_task:ToyTask" for v in verbs[:2])
    features = FeatureSet.load(tmp / "work" / "features.safetensors")
    assert features.task == "toy" and features.setup == "DD-DT-TD-TT-LS"  # the four blocks and the setups' lookahead ones
    with pytest.raises(SystemExit, match="no shipped judge to install"):
        main(["--work", str(tmp / "work"), *TOY])


def test_make_judge_refuses_to_replace_a_certified_judge_unless_forced(toy_verbs, monkeypatch):
    """A judge made by make_judge has no certificate: installing it over a certified one is refused
    before any mining, and the certified file is left as it was; --force replaces it."""
    tmp, judge = toy_verbs
    certified = tmp / "installed.safetensors"
    head = JudgeHead.load(judge)
    head.meta["certificate"] = {"threshold": 0.5}  # its presence is what counts here
    head.save(certified)
    before = certified.read_bytes()
    monkeypatch.setattr(toy_task.ToyTask, "shipped_judge_path", lambda self, k=None: certified)
    main = runpy.run_path(str(REPO / "build_scripts" / "make_judge.py"), run_name="make_judge")["main"]
    verbs = []
    main.__globals__["cli"] = lambda argv: verbs.append(argv) or (cli(argv) if argv[0] in ("mine", "features") else 1)
    with pytest.raises(SystemExit, match="is a certified judge and the one made here would have no certificate: pass "
                                         "--no-install .* or --force"):
        main(["--work", str(tmp / "work"), *TOY])
    assert verbs == [] and certified.read_bytes() == before
    with pytest.raises(SystemExit, match="training DT failed"):  # forced: it goes on to mine, features and train
        main(["--work", str(tmp / "work"), *TOY, "--force", "--setups", "DT", "--max-new-tokens", "8"])


def test_make_judge_keeps_labels_in_an_archive_that_outlives_the_work_folder(toy_verbs):
    """Mined labels are written back to --labels-archive; a run in a fresh folder starts from them."""
    from trtllm_autojudge.mining.store import read_records

    tmp, _ = toy_verbs
    main = runpy.run_path(str(REPO / "build_scripts" / "make_judge.py"), run_name="make_judge")["main"]
    verbs = []
    main.__globals__["cli"] = lambda argv: verbs.append(argv) or (cli(argv) if argv[0] == "mine" else 1)
    archive = tmp / "labels.jsonl.gz"
    flags = [*TOY, "--no-install", "--setups", "DT", "--max-new-tokens", "8", "--labels-archive", str(archive)]
    with pytest.raises(SystemExit, match="feature extraction failed"):
        main(["--work", str(tmp / "first"), *flags])
    mined = read_records(tmp / "first" / "labels.jsonl")[0]
    assert mined and read_records(archive)[0] == mined
    with pytest.raises(SystemExit, match="feature extraction failed"):
        main(["--work", str(tmp / "second"), *flags])
    assert read_records(tmp / "second" / "labels.jsonl")[0] == mined  # from the archive, nothing mined twice
    assert read_records(archive)[0] == mined
    with pytest.raises(SystemExit, match="name a gzip file"):
        main(["--work", str(tmp / "third"), *flags[:-1], str(tmp / "labels.jsonl")])


# ---- the program task on the tiny random pair ----

def test_lossless_equals_greedy_on_the_program_task(tmp_path):
    target, draft = tiny_pair(seed=3)
    task = Gsm8kProgramTask()
    prompts = program_prompts(4, seed=7)
    questions = [Question(pid, p, gold="3") for pid, p, _ in prompts]
    runs = run_points(target, draft, decode_program, questions, [OperatingPoint("lossless")], DraftTree.chain(4),
                      task.checker, tmp_path, max_new_tokens=16, progress=False)
    answers = set()
    for run, (_, prompt, _) in zip(runs, prompts):
        greedy = greedy_generate(target, prompt, 16)
        assert run["tokens"] == greedy
        assert run["answer"] == task.checker.answer(decode_program(greedy))
        answers.add(run["answer"])
    assert answers  # each a number or a failure answer
    task.checker.sandbox.close()


def _running(pid: int) -> bool:
    """True while ``pid`` exists and is not a zombie (a container's init may not reap orphans)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, ProcessLookupError):
        return False


def test_mining_killed_during_a_program_check_resumes_exactly(tmp_path):
    """SIGKILL in the middle of the 9th program check: the rerun mines only the unfinished prompts;
    the labels equal an uninterrupted run's, none is lost or duplicated; the orphaned worker exits."""
    killed = subprocess.run([sys.executable, str(HERE / "mine_programs_killed.py"), "--out", str(tmp_path / "cut.jsonl"),
                             "--kill-at", "9", "--pid-file", str(tmp_path / "pid")], capture_output=True)
    assert killed.returncode == -9, killed.stderr.decode()[-2000:]
    done_before = len((tmp_path / "cut.jsonl").read_text().splitlines()) if (tmp_path / "cut.jsonl").exists() else 0
    target, draft = tiny_pair(seed=3)
    task = Gsm8kProgramTask()
    miner = LabelMiner(target, draft, task.checker, decode_program, MiningConfig(max_new_tokens=16))
    mine_prompts(miner, program_prompts(), tmp_path / "clean.jsonl", progress=False)
    clean = [json.loads(x) for x in (tmp_path / "clean.jsonl").read_text().splitlines()]
    assert 0 < done_before < len(clean)  # it died in the middle of the run
    stats = mine_prompts(miner, program_prompts(), tmp_path / "cut.jsonl", progress=False)
    assert stats["prompts"] == len(clean) - done_before  # only the unfinished prompts are mined
    cut = [json.loads(x) for x in (tmp_path / "cut.jsonl").read_text().splitlines()]
    strip = lambda r: {k: v for k, v in r.items() if k != "cost"}  # noqa: E731
    assert [strip(r) for r in cut] == [strip(r) for r in clean]
    assert sum(len(r["labels"]) for r in clean) > 10 and len({a for r in clean for a in r["alt_answers"]}) > 1
    worker = int((tmp_path / "pid").read_text())
    deadline = time.monotonic() + 5
    while _running(worker) and time.monotonic() < deadline:  # the worker sees its stdin close and exits
        time.sleep(0.1)
    assert not _running(worker), f"the sandbox worker {worker} outlived the killed miner"
    task.checker.sandbox.close()


def test_heldout_questions_spread_over_templates_and_leave_out_trained(tmp_path):
    main = runpy.run_path(str(REPO / "build_scripts" / "heldout_questions.py"), run_name="heldout")["main"]
    out = tmp_path / "q.jsonl"
    assert main(["--task", "gsm8k-cot", "--per-template", "2", "--seed", "5", "--out", str(out)]) == 0
    rows = [json.loads(x) for x in out.read_text().splitlines()]
    seen = Gsm8kCotTask().trained_questions()
    everything = Gsm8kCotTask().problems("train", False, 2, 5)
    assert {r["question"] for r in rows} == {p.question for p in everything if p.question not in seen} and len(rows) > 100
    firsts = [r["template_id"] for r in rows][: len({r["template_id"] for r in rows})]
    assert len(set(firsts)) == len(firsts)  # every template once before any twice
    # --exclude: a second set (a calibration set) disjoint from the first, by question text
    evaluation = tmp_path / "eval.jsonl"
    evaluation.write_text("".join(json.dumps(r) + "\n" for r in rows[::2]))
    other = tmp_path / "calibration.jsonl"
    assert main(["--task", "gsm8k-cot", "--per-template", "2", "--seed", "5", "--exclude", str(evaluation),
                 "--out", str(other)]) == 0
    kept = [json.loads(x)["question"] for x in other.read_text().splitlines()]
    assert sorted(kept) == sorted(r["question"] for r in rows[1::2])


def test_make_judge_adds_templates_to_older_records(tmp_path):
    """Records mined before records kept their template get it from the drawn questions, by id; a
    record of other settings is refused."""
    from trtllm_autojudge.mining.cli import problem_id
    from trtllm_autojudge.mining.store import append_record, read_records

    add_templates = runpy.run_path(str(REPO / "build_scripts" / "make_judge.py"), run_name="make_judge")["add_templates"]
    task = load_task("gsm8k-program")
    problems = task.problems("train", False, 2, 7)[:3]
    labels = tmp_path / "labels.jsonl"
    for i, q in enumerate(problems):
        append_record(labels, {"id": problem_id(q.question), "prompt_ids": [1], "final_ids": [1], "labels": [],
                               **({"template": q.template_id} if i == 0 else {})})
    add_templates(labels, task, 2, 7)
    assert [r["template"] for r in read_records(labels)[0]] == [q.template_id for q in problems]
    append_record(labels, {"id": "not-a-question", "prompt_ids": [1], "final_ids": [1], "labels": []})
    with pytest.raises(SystemExit, match="1 records .* are no question of --variants-per-template 2 --seed 7"):
        add_templates(labels, task, 2, 7)


def test_make_judge_installs_the_best_validation_judge_as_the_tasks_judge(toy_verbs, monkeypatch, capsys):
    """The setup with the best validation ROC-AUC is copied into the task's judge file, and the printout
    says how to certify its threshold."""
    from trtllm_autojudge.tasks import base as tasks_base

    tmp, _ = toy_verbs
    monkeypatch.setattr(tasks_base, "ASSETS", tmp / "assets")
    monkeypatch.setattr(toy_task.ToyTask, "shipped_judge", "judge_toy.safetensors")
    (tmp / "assets").mkdir()
    main = runpy.run_path(str(REPO / "build_scripts" / "make_judge.py"), run_name="make_judge")["main"]
    auc = {"DT": 0.71, "DT-LS": 0.83, "DT-DT1": 0.77}

    def fake_cli(argv):  # mine and features really run; training writes a judge of a known ROC-AUC
        if argv[0] != "train":
            return cli(argv)
        setup = argv[argv.index("--setup") + 1]
        F = feature_dim(setup, 8, 8)
        JudgeHead(np.zeros(F), np.zeros(F), np.ones(F), auc[setup], setup, 8, 8, 0.5,
                  meta={"metrics": {"val_roc_auc": auc[setup]}}).save(argv[argv.index("--out") + 1])
        return 0

    main.__globals__["cli"] = fake_cli
    assert main(["--work", str(tmp / "work"), *TOY, "--setups", ",".join(auc), "--max-new-tokens", "8"]) == 0
    installed = JudgeHead.load(tmp / "assets" / "judge_toy.safetensors")
    assert installed.setup == "DT-LS" and installed.intercept == pytest.approx(0.83)
    assert "installed the DT-LS judge (best validation ROC-AUC)" in capsys.readouterr().out

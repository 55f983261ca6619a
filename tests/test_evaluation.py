"""eval on the tiny random pair: consistent metrics, oracle >= lossless, stable schema, a PNG."""
import argparse
import csv
import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from test_mining import KeyTokens, decode, tiny_prompts
from tiny_models import tiny_pair
from trtllm_autojudge.decoding.tree import DraftTree
from trtllm_autojudge.evaluation.cli import parse_points
from trtllm_autojudge.evaluation import common
from trtllm_autojudge.evaluation.common import AUTO_HARM_CAPS, judge_thresholds
from trtllm_autojudge.evaluation.methods import OperatingPoint
from trtllm_autojudge.evaluation.plot import frontier_x, plot_frontier
from trtllm_autojudge.evaluation.certificate import pair_fingerprint
from trtllm_autojudge.evaluation.runner import (SUMMARY_COLUMNS, Question, format_table, run_points, setup_fingerprint,
                                               summarize, write_summary)
from trtllm_autojudge.judge.frontier import choose_threshold, sweep_thresholds
from trtllm_autojudge.judge.head import JudgeHead, feature_dim
from trtllm_autojudge.mining.miner import LabelMiner, MiningConfig
from trtllm_autojudge.mining.store import unimportant_map
from trtllm_autojudge.tasks import Gsm8kCotTask, load_task
from trtllm_autojudge.tasks.base import ASSETS

K, MAX_NEW = 4, 16


@pytest.fixture(scope="module")
def evaluated(tmp_path_factory):
    target, draft = tiny_pair(seed=3)
    checker = KeyTokens(window=10)
    prompts = tiny_prompts(4, seed=5)
    questions = [Question(pid, p, gold="0") for pid, p, _ in prompts]
    miner = LabelMiner(target, draft, checker, decode, MiningConfig(max_new_tokens=MAX_NEW))
    records = [miner.mine(p, record_id=pid) for pid, p, _ in prompts]
    unimportant = unimportant_map(records)
    rng = np.random.default_rng(0)
    F = feature_dim("DT", draft.hidden_size, target.hidden_size)
    judge = JudgeHead(0.05 * rng.normal(size=F), np.zeros(F), np.ones(F), -0.5, "DT", draft.hidden_size,
                      target.hidden_size, 0.5)
    points = parse_points("judge@0.3,judge@0.6,topk@2,typical@0.09,0.3,mtp@4,0.1,oracle")
    out = tmp_path_factory.mktemp("eval")
    runs = run_points(target, draft, decode, questions, points, DraftTree.chain(K), checker, out, judge, unimportant,
                      MAX_NEW, progress=False)
    rows = summarize(runs, points, checker, [q.qid for q in questions])
    return out, runs, rows, points, records, questions, draft, judge, unimportant


def test_eval_adds_the_exact_oracle_row(evaluated):
    from trtllm_autojudge.evaluation.cli import oracle_rows

    _, runs, rows, _, records, questions, draft, *_ = evaluated
    rows = [dict(r) for r in rows]
    meta = oracle_rows(rows, runs, records, questions, draft, DraftTree.chain(K))
    by = {r["spec"]: r for r in rows}
    assert by["oracle-trajectory"]["tokens_per_cycle"] >= by["lossless"]["tokens_per_cycle"]
    assert by["oracle-trajectory"]["new_tokens"] == sum(len(r["final_ids"]) - len(r["prompt_ids"]) for r in records)
    assert meta["oracle_unimportant"] == sum(1 - lab[1] for r in records for lab in r["labels"])
    assert meta["live_oracle_left_mined_sequence"] == len(meta["live_oracle_divergence_positions"]) <= len(records)
    assert oracle_rows(rows, runs, records, questions, draft, DraftTree.static([2, 1])) and \
        sum(r["spec"] == "oracle-trajectory" for r in rows) == 1  # trees: no replay row


def test_metrics_are_consistent(evaluated):
    _, runs, rows, *_ = evaluated
    by = {r["spec"]: r for r in rows}
    assert list(by) == ["lossless", "judge@0.3", "judge@0.6", "topk@2", "typical@0.09,0.3", "mtp@4,0.1", "oracle"]
    assert by["lossless"]["agreement"] == 1.0 and by["lossless"]["judged_fraction"] == 0
    for r in rows:
        assert 1.0 <= r["tokens_per_cycle"] <= K + 1
        assert r["tokens_per_cycle"] == pytest.approx(r["accepted_per_cycle"] + 1)
        assert 0 <= r["judged_fraction"] <= 1 and r["questions"] == 4
    assert by["oracle"]["tokens_per_cycle"] >= by["lossless"]["tokens_per_cycle"]
    assert by["oracle"]["agreement"] == 1.0  # mined unimportant swaps keep the answer, by definition
    assert (by["lossless"]["vs_lossless"], by["lossless"]["vs_lossless_lo"], by["lossless"]["vs_lossless_hi"]) == (1, 1, 1)
    for r in rows:
        assert r["vs_lossless"] == pytest.approx(r["tokens_per_cycle"] / by["lossless"]["tokens_per_cycle"])
        assert r["vs_lossless_lo"] <= r["vs_lossless"] + 1e-12 and r["vs_lossless"] <= r["vs_lossless_hi"] + 1e-12


def test_runs_resume(evaluated):
    out, runs, _, points, *_, judge, unimportant = evaluated
    target, draft = tiny_pair(seed=3)
    again = run_points(target, draft, decode, [Question(r["qid"], [], None) for r in runs if r["spec"] == "lossless"],
                       points, DraftTree.chain(K), KeyTokens(10), out, judge, unimportant, MAX_NEW, progress=False)
    assert len(again) == len(runs)  # nothing re-run (the prompts given here are empty and would fail)


def test_runs_go_question_by_question(evaluated):
    _, runs, _, points, *_ = evaluated
    per_question = len(points) + 1  # the points and lossless
    blocks = [runs[i:i + per_question] for i in range(0, len(runs), per_question)]
    assert all(len({r["qid"] for r in b}) == 1 and b[0]["spec"] == "lossless" for b in blocks)


def test_summary_schema_and_plot(evaluated):
    out, _, rows, *_ = evaluated
    paths = write_summary(rows, out, {"note": "test"})
    with open(paths["csv"]) as f:
        table = list(csv.DictReader(f))
    assert tuple(table[0].keys()) == SUMMARY_COLUMNS and len(table) == len(rows)
    data = json.loads(paths["json"].read_text())
    assert set(data) == {"meta", "rows"} and all(tuple(r) == SUMMARY_COLUMNS for r in data["rows"])
    png = plot_frontier(rows, out / "frontier.png")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 10_000


def test_answers_changed_without_a_judged_acceptance_count_and_are_told_apart():
    """A response whose rule accepted no mismatch yet ended in another answer (a batch's rounding)
    still counts as changed, and the row says how many such there were."""
    class Same:
        same = staticmethod(lambda a, b: a == b)

    base = dict(cycles=10, accepted_per_cycle=9.0, new_tokens=100, seconds=1.0, judged_accepts=0)
    runs = [dict(base, spec="lossless", qid=q, answer="1", gold_correct=True) for q in "abcd"]
    runs += [dict(base, spec="judge@0.1", qid="a", answer="1", gold_correct=True),
             dict(base, spec="judge@0.1", qid="b", answer="2", gold_correct=False),  # drifted: no acceptance
             dict(base, spec="judge@0.1", qid="c", answer="2", gold_correct=False, judged_accepts=1),
             dict(base, spec="judge@0.1", qid="d", answer="1", gold_correct=True, judged_accepts=3)]
    lossless, judge = summarize(runs, [OperatingPoint.parse("judge@0.1")], Same, list("abcd"))
    assert (judge["answers_changed"], judge["gold_losses"], judge["changed_without_acceptance"]) == (2, 2, 1)
    assert judge["agreement"] == 0.5 and lossless["changed_without_acceptance"] == 0
    assert ("of the answers changed, in responses with no judged acceptance (rounding; counted): judge@0.1 1"
            in format_table([lossless, judge]))


def test_operating_point_specs():
    assert OperatingPoint.parse("typical@0.09,0.3").params == (0.09, 0.3)
    assert [p.spec for p in parse_points("topk@2,mtp@4,0.1,lossless")] == ["topk@2", "mtp@4,0.1", "lossless"]
    for bad, match in (("nope@1", "unknown method"), ("topk", "takes 1"), ("topk@x", "numbers")):
        with pytest.raises(ValueError, match=match):
            OperatingPoint.parse(bad)
    with pytest.raises(ValueError, match="oracle needs labels"):
        OperatingPoint.parse("oracle").rule()


def test_auto_thresholds_follow_the_judge_frontier():
    rng = np.random.default_rng(1)
    labels = rng.random(400) < 0.8
    probs = np.clip(0.8 + 0.05 * labels + 0.05 * rng.normal(size=400), 0, 1)  # probabilities near the base rate
    frontier = sweep_thresholds(probs, labels)
    judge = JudgeHead(np.ones(2), np.zeros(2), np.ones(2), 0.0, "DT", 2, 2, 0.5, meta={"metrics": {"frontier": frontier}})
    auto = judge_thresholds("auto", judge)
    assert auto == sorted(set(auto)) and len(auto) >= 3
    for cap in AUTO_HARM_CAPS:  # each cap's threshold is the largest one within the cap
        assert choose_threshold(frontier, cap)["threshold"] in auto
    assert all(0.6 < t < 1.0 for t in auto)  # inside the judge's probability range, unlike fixed defaults
    assert judge_thresholds("0.3, 0.1", judge) == [0.3, 0.1]
    assert judge_thresholds("", judge) == [] and judge_thresholds("auto", None) == []
    bare = JudgeHead(np.ones(2), np.zeros(2), np.ones(2), 0.0, "DT", 2, 2, 0.25)
    assert judge_thresholds("auto", bare) == [0.25]
    with pytest.raises(SystemExit, match="comma-separated numbers or 'auto'"):
        judge_thresholds("low", judge)


def test_missing_shipped_judge_is_optional_unless_required(tmp_path, monkeypatch):
    task = Gsm8kCotTask()
    monkeypatch.setattr(task, "shipped_judge_path", lambda k=None: tmp_path / "judge_gsm8k.safetensors")
    args = argparse.Namespace(judge=None, target="tuned", draft="embedded")
    assert common.load_judge(args, None, None, required=False, task=task) is None  # baselines-only eval runs without one
    with pytest.raises(SystemExit, match="no judge is shipped for the embedded pair on task gsm8k-cot .*make_judge.py"):
        common.load_judge(args, None, None, required=True, task=task)
    with pytest.raises(SystemExit, match="needs a judge file for your models"):
        common.load_judge(argparse.Namespace(judge=None, target="my/target", draft="my/draft"), None, None, required=True,
                          task=task)
    with pytest.raises(SystemExit, match="judge file .*absent.safetensors not found"):
        common.load_judge(argparse.Namespace(judge=str(tmp_path / "absent.safetensors"), target="tuned",
                                             draft="embedded"), None, None, required=False, task=task)


def test_the_embedded_pair_takes_the_judge_certified_for_its_window(monkeypatch):
    """A task may ship a judge per chain window (its certificate's K): the embedded pair's default at
    that --k; other windows, trees and user pairs take the task's judge or none."""
    task = Gsm8kCotTask()
    monkeypatch.setattr(task, "shipped_window_judges", {32: "judge_window_32.safetensors"})
    assert task.shipped_judge_path(32).name == "judge_window_32.safetensors"
    assert task.shipped_judge_path(16) == task.shipped_judge_path() == task.shipped_judge_path(None)
    monkeypatch.setattr(task, "shipped_judge_path", lambda k=None: Path(f"judge_k{k}.safetensors"))
    monkeypatch.setattr(Path, "is_file", lambda self: True)
    pick = lambda **kw: common.judge_path(argparse.Namespace(judge=None, target="tuned", draft="embedded", **kw),  # noqa: E731
                                          required=True, task=task)
    assert pick(k=32, tree=None).name == "judge_k32.safetensors"
    assert pick(k=32, tree="2,1").name == "judge_kNone.safetensors"  # a tree is no chain window


def test_each_shipped_window_judge_is_certified_at_its_window():
    """--k K takes the judge certified for a chain of K: its certificate says so, names a regenerable
    question set, and carries the answer-budget ladder that --answer-budget reads."""
    task = load_task("gsm8k-program")
    assert task.shipped_window_judges, "the program task ships a judge per long window"
    for k, name in task.shipped_window_judges.items():
        path = common.judge_path(argparse.Namespace(judge=None, target="tuned", draft="embedded", k=k, tree=None),
                                 required=True, task=task)
        assert path.name == name
        judge = JudgeHead.load(path)
        cert = judge.meta["certificate"]
        assert (cert["k"], cert["tree"], cert["max_new_tokens"]) == (k, None, 320) and judge.threshold == cert["threshold"]
        assert cert["questions"] >= 1389 and cert["answer_change_bound"] <= 0.01
        assert cert["question_set"]["recipe"].startswith("python build_scripts/heldout_questions.py")
        assert {rung["budget"] for rung in cert["ladder"]} >= {0.01}


def test_judge_record_names_a_shipped_judge_by_its_place_in_the_package(tmp_path, monkeypatch):
    """Result files must name no folder of the machine they ran on: a shipped judge (an absolute path
    into the package) is recorded as trtllm_autojudge/assets/..., a user's judge as given."""
    head = JudgeHead.load(ASSETS / "judge_gsm8k_program.safetensors")
    shipped = common.judge_record(ASSETS / "judge_gsm8k_program.safetensors", head)
    assert shipped["file"] == "trtllm_autojudge/assets/judge_gsm8k_program.safetensors"
    assert shipped["fingerprint"] == head.fingerprint()
    own = tmp_path / "mine.safetensors"
    assert common.judge_record(own, head)["file"] == str(own)
    monkeypatch.chdir(ASSETS.parent)  # a relative path into the package reads the same
    assert common.judge_record("assets/judge_gsm8k_program.safetensors", head)["file"] == shipped["file"]


def test_rows_carry_answer_and_gold_intervals_and_bounds(evaluated):
    """The counts behind each row, and Clopper-Pearson intervals around its shares."""
    from trtllm_autojudge.evaluation.certificate import interval, upper_bound

    _, runs, rows, *_ = evaluated
    by_run = {(r["spec"], r["qid"]): r for r in runs}
    for r in rows:
        mine = [run for (spec, _), run in by_run.items() if spec == r["spec"]]
        changed = sum(run["answer"] != by_run[("lossless", run["qid"])]["answer"] for run in mine)
        losses = sum(by_run[("lossless", run["qid"])]["gold_correct"] and not run["gold_correct"] for run in mine)
        assert (r["answers_changed"], r["gold_losses"]) == (changed, losses)
        assert (r["agreement_lo"], r["agreement_hi"]) == interval(4 - changed, 4)
        assert r["agreement_lo"] <= r["agreement"] <= r["agreement_hi"]
        assert r["gold_accuracy_lo"] <= r["gold_accuracy"] <= r["gold_accuracy_hi"]
        assert r["answer_change_bound"] == upper_bound(changed, 4) >= 1 - r["agreement"]
        assert r["gold_drop_bound"] == upper_bound(losses, 4)


def _margin_setup(n_questions: int):
    """(target, draft, checker, questions, judge): the tiny pair and a random DT judge that accepts some mismatches."""
    target, draft = tiny_pair(seed=3)
    questions = [Question(pid, p, gold="0") for pid, p, _ in tiny_prompts(n_questions, seed=5)]
    rng = np.random.default_rng(0)
    F = feature_dim("DT", draft.hidden_size, target.hidden_size)
    judge = JudgeHead(0.05 * rng.normal(size=F), np.zeros(F), np.ones(F), -0.5, "DT", draft.hidden_size,
                      target.hidden_size, 0.5)
    return target, draft, KeyTokens(window=10), questions, judge

def test_a_judge_point_inside_a_runs_margin_reuses_it_token_for_token(tmp_path):
    """judge@t' inside the threshold margin of the judge@t run copies it (reused_from); a fresh
    decode at t' gives the same tokens. A limited point (judge@t',M) or another judge never reuses."""
    target, draft, checker, questions, judge = _margin_setup(3)
    run = lambda points, out, j=judge: run_points(target, draft, decode, questions, parse_points(points),  # noqa: E731
                                                  DraftTree.chain(K), checker, tmp_path / out, j, None, MAX_NEW,
                                                  progress=False)
    first = {r["qid"]: r for r in run("judge@0.4", "a") if r["spec"] == "judge@0.4"}
    inside = {}
    for qid, r in first.items():
        lo, hi = (-np.inf if r["judge_margin"][0] is None else r["judge_margin"][0],
                  np.inf if r["judge_margin"][1] is None else r["judge_margin"][1])
        t = 1 / (1 + np.exp(-(max(lo, -30.0) + min(hi, 30.0)) / 2))  # the middle of the margin, in logit space
        inside[qid] = float(f"{t:.6g}")
    for qid, t in inside.items():
        q = next(q for q in questions if q.qid == qid)
        reused = run(f"judge@{t:g}", "a")
        rec = next(r for r in reused if r["spec"] == f"judge@{t:g}" and r["qid"] == qid)
        assert rec["reused_from"] == "judge@0.4" and rec["tokens"] == first[qid]["tokens"]
        fresh = run_points(target, draft, decode, [q], [OperatingPoint("judge", (t,))], DraftTree.chain(K), checker,
                           tmp_path / f"fresh-{qid}", judge, None, MAX_NEW, progress=False)
        assert next(r for r in fresh if r["spec"] != "lossless")["tokens"] == first[qid]["tokens"]
    # a per-response limit: runs with fewer judged acceptances are reused (it never bound), the
    # others decoded again; both equal a fresh decode under the limit
    m = max(r["judged_accepts"] for r in first.values())  # the largest count: the limit binds there only
    spec = f"judge@0.4,{m}"
    limited = {r["qid"]: r for r in run(spec, "a") if r["spec"] == spec}
    fresh = {r["qid"]: r for r in run(spec, "limited-fresh") if r["spec"] == spec}
    for qid, r in limited.items():
        assert ("reused_from" in r) == (first[qid]["judged_accepts"] < m) and r["tokens"] == fresh[qid]["tokens"]
    assert {first[q]["judged_accepts"] < m for q in limited} == {True, False}  # both cases occur
    other = JudgeHead(judge.coef, judge.mean, judge.scale, judge.intercept + 1e-3, "DT", judge.draft_hidden,
                      judge.target_hidden, 0.5)
    with pytest.raises(ValueError, match="holds runs of another setup: judge_weights .*Give another output folder"):
        run("judge@0.4000001", "a", other)  # another judge would resume from (and reuse) this one's runs


def test_a_scored_lossless_run_answers_every_judge_point_below_its_margin(tmp_path):
    """score_lossless (calibrate): the lossless run scores the judge at threshold 0, with lossless
    tokens; a judge point whose cut lies below a response's smallest judged logit copies it (and
    equals a fresh decode), one above it decodes again."""
    target, draft, checker, questions, judge = _margin_setup(4)
    run = lambda points, out, scored: run_points(target, draft, decode, questions, parse_points(points),  # noqa: E731
                                                 DraftTree.chain(K), checker, tmp_path / out, judge, None, MAX_NEW,
                                                 progress=False, score_lossless=scored)
    plain = {r["qid"]: r for r in run("", "plain", False)}
    scored = {r["qid"]: r for r in run("", "scored", True) if r["spec"] == "lossless"}
    assert all(scored[q]["tokens"] == plain[q]["tokens"] and scored[q]["judged_accepts"] == 0 for q in plain)
    assert "judge_margin" not in plain[questions[0].qid] or plain[questions[0].qid]["judge_margin"] is None
    his = {q: r["judge_margin"][1] for q, r in scored.items()}  # the smallest judged logit of each response
    assert all(r["judge_margin"][0] is None for r in scored.values()) and len(set(his.values())) > 1
    cut = float(np.median(list(his.values())))  # some responses' margins hold it, others' do not
    t = float(f"{1 / (1 + np.exp(-cut)):.6g}")
    spec = f"judge@{t:g}"
    mine = {r["qid"]: r for r in run(spec, "scored", True) if r["spec"] == spec}
    fresh = {r["qid"]: r for r in run(spec, "fresh", False) if r["spec"] == spec}
    for q, r in mine.items():
        below = float(np.log(t) - np.log1p(-t)) <= his[q]
        assert (r.get("reused_from") == "lossless") == below and r["tokens"] == fresh[q]["tokens"]
    assert {float(np.log(t) - np.log1p(-t)) <= h for h in his.values()} == {True, False}  # both cases occur
    # the judge file's own point ("judge", its default threshold) reuses the same way
    default = replace(judge, threshold=t)
    mine = {r["qid"]: r for r in run_points(target, draft, decode, questions, parse_points("judge"), DraftTree.chain(K),
                                            checker, tmp_path / "default", default, None, MAX_NEW, progress=False,
                                            score_lossless=True) if r["spec"] == "judge"}
    assert {q: r.get("reused_from") == "lossless" for q, r in mine.items()} == \
        {q: float(np.log(t) - np.log1p(-t)) <= his[q] for q in mine}
    assert all(r["tokens"] == fresh[q]["tokens"] for q, r in mine.items())


def test_a_folder_refuses_runs_of_another_setup(tmp_path):
    """setup.json: the pair's weights, dtype, tree, response length, batch and judge of a folder's
    first run; every row carries its fingerprint. A run under another setup is refused, naming the
    field, and leaves the folder as it was."""
    target, draft = tiny_pair(seed=3)
    questions = [Question(pid, p, gold="0") for pid, p, _ in tiny_prompts(1, seed=5)]
    _, _, _, _, judge = _margin_setup(1)
    run = lambda tree, new, d=draft, batch=1, j=None: run_points(  # noqa: E731
        target, d, decode, questions, [], tree, KeyTokens(window=10), tmp_path, j, None, new, progress=False, batch=batch)
    run(DraftTree.chain(K), MAX_NEW)
    run(DraftTree.chain(K), MAX_NEW)  # the same setup resumes
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    rows = [json.loads(line) for line in (tmp_path / "runs.jsonl").read_text().splitlines()]
    assert rows and {r["setup"] for r in rows} == {setup_fingerprint(json.loads((tmp_path / "setup.json").read_text()))}
    for kwargs, what in [(dict(tree=DraftTree.chain(K + 1), new=MAX_NEW), "tree"),
                         (dict(tree=DraftTree.chain(K), new=MAX_NEW + 1), "max_new_tokens"),
                         (dict(tree=DraftTree.chain(K), new=MAX_NEW, d=tiny_pair(seed=4)[1]), "pair"),
                         (dict(tree=DraftTree.chain(K), new=MAX_NEW, batch=2), "batch 1 \\(now 2\\)"),
                         (dict(tree=DraftTree.chain(K), new=MAX_NEW, j=judge), f"judge_weights None \\(now {judge.weights_fingerprint()}\\)")]:
        with pytest.raises(ValueError, match=f"holds runs of another setup: {what}.*Give another output folder"):
            run(**kwargs)
        assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before  # untouched
    with (tmp_path / "runs.jsonl").open("a") as f:  # a row appended by another setup's run
        f.write(json.dumps({**rows[0], "qid": "x", "setup": "0123456789abcdef"}) + "\n")
    with pytest.raises(ValueError, match="line 2 was written under setup 0123456789abcdef, not this folder's"):
        run(DraftTree.chain(K), MAX_NEW)


def test_a_folder_made_before_setups_were_fingerprinted_is_refused(tmp_path):
    """A folder whose setup.json lacks the dtype, batch and judge (made before they were recorded)
    is refused naming them, rather than resumed under a setup it cannot vouch for."""
    target, draft = tiny_pair(seed=3)
    questions = [Question(pid, p, gold="0") for pid, p, _ in tiny_prompts(1, seed=5)]
    (tmp_path / "setup.json").write_text(json.dumps({"pair": pair_fingerprint(target, draft),
                                                     "tree": {"parents": list(DraftTree.chain(K).parents)},
                                                     "max_new_tokens": MAX_NEW}))
    with pytest.raises(ValueError, match=r"another setup: dtype None \(now float32\); batch None \(now 1\)"):
        run_points(target, draft, decode, questions, [], DraftTree.chain(K), KeyTokens(window=10), tmp_path, None,
                   None, MAX_NEW, progress=False)


def test_stop_ends_a_run_after_the_question_that_asks(tmp_path):
    target, draft = tiny_pair(seed=3)
    questions = [Question(pid, p, gold="0") for pid, p, _ in tiny_prompts(4, seed=5)]
    runs = run_points(target, draft, decode, questions, [], DraftTree.chain(K), KeyTokens(window=10), tmp_path, None,
                      None, MAX_NEW, progress=False, stop=lambda rs: len(rs) >= 2)
    assert [r["qid"] for r in runs] == [q.qid for q in questions[:2]]


@pytest.mark.parametrize("setup", ["DT", "DD-DT", "DT-DT1-DT2-LS"])
def test_the_compiled_core_decides_as_the_python_rule(tmp_path, setup):
    """eval --accept-impl core: the host core (torch.ops.autojudge.accept on CPU) emits the Python
    rule's tokens; records say which decided; one output folder holds one of them; an operating
    point the core does not implement (a per-response limit) is refused."""
    target, draft = tiny_pair(seed=3)
    checker = KeyTokens(window=10)
    questions = [Question(pid, p, gold="0") for pid, p, _ in tiny_prompts(3, seed=5)]
    rng = np.random.default_rng(1)
    F = feature_dim(setup, draft.hidden_size, target.hidden_size)
    judge = JudgeHead(0.05 * rng.normal(size=F), np.zeros(F), np.ones(F), -0.4, setup, draft.hidden_size,
                      target.hidden_size, 0.5)
    points = parse_points("judge@0.45")
    run = lambda impl, out: run_points(target, draft, decode, questions, points, DraftTree.chain(K), checker,  # noqa: E731
                                       tmp_path / out, judge, None, MAX_NEW, progress=False, accept_impl=impl)
    by = lambda runs: {r["qid"]: r for r in runs if r["spec"] == "judge@0.45"}  # noqa: E731
    python, core = by(run("python", "py")), by(run("core", "core"))
    assert {q: r["tokens"] for q, r in python.items()} == {q: r["tokens"] for q, r in core.items()}
    assert sum(r["judged_accepts"] for r in core.values()) > 0
    assert {r["accept_impl"] for r in core.values()} == {"core"} and all(r["judge_margin"] is None for r in core.values())
    with pytest.raises(ValueError, match="holds runs of another setup: accept_impl python \\(now core\\)"):
        run("core", "py")
    with pytest.raises(ValueError, match="per-response limit 2\\): use --accept-impl python"):
        run_points(target, draft, decode, questions, parse_points("judge@0.45,2"), DraftTree.chain(K), checker,
                   tmp_path / "limited", judge, None, MAX_NEW, progress=False, accept_impl="core")


def test_certified_frontier_script_plots_each_series(evaluated, tmp_path):
    """experiments/certified_frontier.py reads eval and calibrate folders, and calibrate result files kept
    apart from their folder, and writes a PNG and the rows."""
    import runpy
    from pathlib import Path as P

    out, runs, rows, *_ = evaluated
    write_summary(rows, out, {})
    cal = tmp_path / "cal"
    cal.mkdir()
    (cal / "calibration.json").write_text(json.dumps({"candidates": [dict(r, threshold=0.3, certified=True)
                                                                     for r in rows if r["method"] == "judge"]}))
    main = runpy.run_path(str(P(__file__).resolve().parents[1] / "experiments" / "certified_frontier.py"),
                          run_name="certified_frontier")["main"]
    kept = tmp_path / "certify_kept.json"
    kept.write_text((cal / "calibration.json").read_text())
    assert main(["--series", f"eval={out}", "--series", f"cal={cal}", "--series", f"kept={kept}", "--budget", "0.01",
                 "--out", str(tmp_path / "f.png"), "--json", str(tmp_path / "f.json")]) == 0
    data = json.loads((tmp_path / "f.json").read_text())
    assert [r["spec"] for r in data["eval"]] == ["judge@0.3", "judge@0.6"] and len(data["cal"]) == 2
    assert data["kept"] == data["cal"]
    assert (tmp_path / "f.png").stat().st_size > 0
    assert main(["--series", f"eval={out}", "--x", "share", "--goal", "1.1", "--out", str(tmp_path / "s.png")]) == 0
    assert (tmp_path / "s.png").stat().st_size > 0
    judge_rows = [r for r in rows if r["method"] == "judge"]
    assert frontier_x(judge_rows, "share") == [r["answers_changed"] / r["questions"] for r in judge_rows]
    assert frontier_x(judge_rows, "bound") == [r["answer_change_bound"] for r in judge_rows]
    with pytest.raises(ValueError, match="x must be one of"):
        frontier_x(judge_rows, "gain")
    with pytest.raises(SystemExit, match="neither calibration.json"):
        main(["--series", f"x={tmp_path}", "--out", str(tmp_path / "g.png")])
    with pytest.raises(SystemExit, match="no 'candidates': give a calibrate result"):
        main(["--series", f"x={out / 'summary.json'}", "--out", str(tmp_path / "g.png")])


def test_the_table_keeps_its_columns_apart_at_their_widest():
    """Shares of 100% with wide intervals and a wide bound still leave a space between columns."""
    row = {"spec": "judge@0.0550084", "tokens_per_cycle": 14.48, "vs_lossless": 1.194, "vs_lossless_lo": 1.028,
           "vs_lossless_hi": 1.395, "agreement": 1.0, "agreement_lo": 0.631, "agreement_hi": 1.0,
           "answers_changed": 0, "questions": 8, "answer_change_bound": 0.312, "gold_accuracy": 1.0,
           "gold_accuracy_lo": 0.631, "gold_accuracy_hi": 1.0, "tokens_per_s": 15.0, "judged_fraction": 0.018}
    head, _, line = format_table([row]).split("\n")
    assert line.split() == ["judge@0.0550084", "14.48", "1.194x", "[1.028,", "1.395]", "100.0%", "[63.1%,", "100.0%]",
                            "0/8", "31.2%", "100.0%", "[63.1%,", "100.0%]", "15.0", "1.8%"]
    assert len(head) >= len(line.rstrip())


@pytest.mark.parametrize("tree", [DraftTree.chain(K), DraftTree.static([2, 2, 1])], ids=["chain", "tree"])
def test_the_compiled_core_applies_a_minimum_run_as_the_python_rule(tmp_path, tree):
    """eval --accept-impl core with a judge whose default operating point has a minimum run (min_run 3):
    the host core emits the Python rule's tokens and judged acceptances, fewer of them than the same
    judge makes without the minimum."""
    target, draft = tiny_pair(seed=3)
    checker = KeyTokens(window=10)
    questions = [Question(pid, p, gold="0") for pid, p, _ in tiny_prompts(3, seed=5)]
    rng = np.random.default_rng(1)
    F = feature_dim("DT", draft.hidden_size, target.hidden_size)
    free = JudgeHead(0.05 * rng.normal(size=F), np.zeros(F), np.ones(F), -0.4, "DT", draft.hidden_size,
                     target.hidden_size, 0.5)
    held = replace(free, meta={"min_run": 3})
    points = parse_points("judge@0.45")
    run = lambda impl, out, judge: run_points(target, draft, decode, questions, points, tree, checker,  # noqa: E731
                                              tmp_path / out, judge, None, MAX_NEW, progress=False, accept_impl=impl)
    by = lambda runs: {r["qid"]: r for r in runs if r["spec"] == "judge@0.45"}  # noqa: E731
    python, core = by(run("python", "py", held)), by(run("core", "core", held))
    assert {q: r["tokens"] for q, r in python.items()} == {q: r["tokens"] for q, r in core.items()}
    assert {q: r["judged_accepts"] for q, r in python.items()} == {q: r["judged_accepts"] for q, r in core.items()}
    without = by(run("core", "free", free))
    assert 0 < sum(r["judged_accepts"] for r in core.values()) < sum(r["judged_accepts"] for r in without.values())

"""Questions decoded at once through a ForwardPool (models/packed_sessions.py): each sequence's
tokens, judged acceptances and margins equal its batch-1 run (float64), on chains, static trees and
an EAGLE drafter's dynamic trees, lossless and judged; eval runs batched equal eval runs at batch 1;
errors reach every waiting thread; bad calls are refused."""
import threading

import numpy as np
import pytest
import torch

from eagle_heads import first_layer_head
from test_mining import KeyTokens, decode, tiny_prompts
from tiny_models import VOCAB, tiny_pair
from trtllm_autojudge.decoding.dynamic_tree import DynamicTree
from trtllm_autojudge.decoding.eagle_drafter import EagleDrafter
from trtllm_autojudge.decoding.modes import JudgeRule
from trtllm_autojudge.decoding.speculative import speculative_generate
from trtllm_autojudge.decoding.tree import DraftTree
from trtllm_autojudge.evaluation import calibrate
from trtllm_autojudge.evaluation.cli import main_eval, parse_points
from trtllm_autojudge.evaluation.runner import Question, packed, run_points, summarize
from trtllm_autojudge.judge.head import JudgeHead, feature_dim
from trtllm_autojudge.models.packed_sessions import ForwardPool, PackedLM

MAX_NEW = 24


def prompts(n, seed=1):
    g = torch.Generator().manual_seed(seed)
    return [torch.randint(3, VOCAB, (int(torch.randint(1, 12, (1,), generator=g)),), generator=g).tolist()
            for _ in range(n)]


def random_judge(setup, draft_hidden, target_hidden, seed=0, intercept=-0.3):
    rng = np.random.default_rng(seed)
    F = feature_dim(setup, draft_hidden, target_hidden)
    return JudgeHead(0.05 * rng.normal(size=F), np.zeros(F), np.ones(F), intercept, setup, draft_hidden,
                     target_hidden, 0.5)


def decode_at_once(target, draft, ps, **kw):
    """speculative_generate on every prompt, one thread each, the forwards packed."""
    pool = ForwardPool()
    t, d = packed(target, pool, deferred=True), packed(draft, pool)
    results, errors = [None] * len(ps), []

    def one(i):
        try:
            with pool.member():
                results[i] = speculative_generate(t, d, ps[i], **kw)
        except BaseException as e:  # noqa: BLE001 (reported below)
            errors.append(e)

    threads = [threading.Thread(target=one, args=(i,)) for i in range(len(ps))]
    for th in threads:
        th.start()
    for th in threads:
        th.join(timeout=120)
    assert not any(th.is_alive() for th in threads), "a decoding thread hung"
    assert not errors, errors
    return results, pool


CASES = [("chain", DraftTree.chain(5), None), ("chain", DraftTree.chain(5), "DD-DT"),
         ("chain", DraftTree.chain(5), "DT-DT1-DT2-LS"), ("tree", DraftTree.static([2, 2, 1]), None),
         ("tree", DraftTree.static([2, 2, 1]), "DD-DT"), ("tree", DraftTree.static([3, 1, 1]), "DT")]


@pytest.mark.parametrize("kind,tree,setup", CASES, ids=lambda c: str(getattr(c, "num_nodes", c)))
def test_packed_sequences_decode_as_each_alone_float64(kind, tree, setup):
    target, draft = tiny_pair(seed=2, dtype=torch.float64)
    ps = prompts(5, seed=3)
    rule = None if setup is None else JudgeRule(random_judge(setup, draft.hidden_size, target.hidden_size), 0.45)
    alone = [speculative_generate(target, draft, p, tree=tree, rule=rule, max_new_tokens=MAX_NEW) for p in ps]
    together, pool = decode_at_once(target, draft, ps, tree=tree, rule=rule, max_new_tokens=MAX_NEW)
    for a, b in zip(alone, together):
        assert b.tokens == a.tokens and b.judged_tokens == a.judged_tokens and b.judge_margin == a.judge_margin
        assert [c.accepted for c in b.cycles] == [c.accepted for c in a.cycles]
    if setup is not None:
        assert sum(len(a.judged_tokens) for a in alone) > 0  # the rule accepted mismatches: the case is exercised
    assert pool.rows > pool.forwards  # forwards were shared


@pytest.mark.parametrize("tree", [DraftTree.chain(4), DynamicTree(4, 3, 8)], ids=["chain", "dynamic"])
def test_an_eagle_drafter_decodes_as_alone_with_the_target_packed(tree):
    target, _ = tiny_pair(seed=2, dtype=torch.float64)
    eagle = EagleDrafter(target, first_layer_head(target))
    ps = prompts(4, seed=4)
    rule = JudgeRule(random_judge("DT", 0, target.hidden_size, seed=1), 0.45)
    alone = [speculative_generate(target, eagle, p, tree=tree, rule=rule, max_new_tokens=MAX_NEW) for p in ps]
    together, _ = decode_at_once(target, eagle, ps, tree=tree, rule=rule, max_new_tokens=MAX_NEW)
    assert [r.tokens for r in together] == [r.tokens for r in alone]
    assert [r.judged_tokens for r in together] == [r.judged_tokens for r in alone]


def test_eval_runs_batched_equal_batch_1_and_report_no_rate(tmp_path):
    target, draft = tiny_pair(seed=3, dtype=torch.float64)
    checker = KeyTokens(window=10)
    questions = [Question(pid, p, gold="0") for pid, p, _ in tiny_prompts(7, seed=5)]
    judge = random_judge("DD-DT", draft.hidden_size, target.hidden_size, seed=2, intercept=-0.4)
    points = parse_points("judge@0.3,judge@0.5,topk@2")
    run = lambda out, batch: run_points(target, draft, decode, questions, points, DraftTree.chain(4), checker,  # noqa: E731
                                        tmp_path / out, judge, None, MAX_NEW, progress=False, score_lossless=True,
                                        batch=batch)
    one = {(r["spec"], r["qid"]): r for r in run("one", 1)}
    three = {(r["spec"], r["qid"]): r for r in run("three", 3)}
    assert one.keys() == three.keys() and len(one) == 4 * len(questions)
    for key, r in one.items():
        assert three[key]["tokens"] == r["tokens"] and three[key]["answer"] == r["answer"]
        assert three[key]["batch"] == 3 and "batch" not in r
    assert any(r.get("reused_from") for r in three.values())  # margins are reused across threads as at batch 1
    rows = {b: summarize(list(runs.values()), points, checker, [q.qid for q in questions]) for b, runs in
            ((1, one), (3, three))}
    assert all(np.isfinite(r["tokens_per_s"]) for r in rows[1]) and all(np.isnan(r["tokens_per_s"]) for r in rows[3])
    assert [r["vs_lossless"] for r in rows[1]] == [r["vs_lossless"] for r in rows[3]]


def test_a_batched_run_stops_after_whole_questions(tmp_path):
    target, draft = tiny_pair(seed=3)
    questions = [Question(pid, p, gold="0") for pid, p, _ in tiny_prompts(9, seed=5)]
    runs = run_points(target, draft, decode, questions, [], DraftTree.chain(4), KeyTokens(window=10), tmp_path, None,
                      None, MAX_NEW, progress=False, stop=lambda rs: len(rs) >= 2, batch=3)
    # the stop is asked as each question ends; the questions in flight then finish, and no new one starts
    assert 2 <= len(runs) <= 4 and len({r["qid"] for r in runs}) == len(runs)
    with pytest.raises(ValueError, match="batch is a number of questions decoded at once: give 1 or more, got 0"):
        run_points(target, draft, decode, questions, [], DraftTree.chain(4), KeyTokens(window=10), tmp_path, None,
                   None, MAX_NEW, progress=False, batch=0)


def test_an_error_in_a_packed_forward_reaches_every_waiting_thread():
    target, _ = tiny_pair(seed=0)
    pool = ForwardPool()
    lm = PackedLM(target, pool)
    barrier, raised = threading.Barrier(2), []

    def one(tokens):
        with pool.member():
            barrier.wait()  # both are members before either submits: one forward holds both rows
            try:
                lm.session().forward(tokens)
            except IndexError as e:
                raised.append(e)

    threads = [threading.Thread(target=one, args=(t,)) for t in ([3, 4], [VOCAB + 5])]  # the second: no such token
    for th in threads:
        th.start()
    for th in threads:
        th.join(timeout=30)
    assert not any(th.is_alive() for th in threads) and len(raised) == 2


def test_bad_calls_are_refused():
    target, _ = tiny_pair(seed=0)
    pool = ForwardPool()
    session = PackedLM(target, pool).session()
    with pytest.raises(RuntimeError, match="outside `with pool.member\\(\\):`"):
        session.forward([3])
    with pool.member():
        with pytest.raises(ValueError, match="mask must be \\[T, cached_len \\+ T\\] = \\[2, 2\\], got \\(2, 3\\)"):
            session.forward([3, 4], mask=torch.ones(2, 3, dtype=torch.bool))
        with pytest.raises(ValueError, match="one position per token: 1 for 2 tokens"):
            session.forward([3, 4], positions=[0])
        session.forward([3, 4, 5])
        with pytest.raises(ValueError, match="retain\\(1, \\[0\\]\\) is outside the cache of 3 entries"):
            session.retain(1, [0])
    with pytest.raises(TypeError, match="packed sessions run a TransformersLM, got str"):
        PackedLM("a model", pool)


@pytest.mark.parametrize("main", [main_eval, calibrate.main], ids=["eval", "calibrate"])
def test_the_clis_refuse_a_batch_below_1(main, capsys):
    argv = ["--task", "gsm8k-program", "--batch", "0"] + (["--out", "x.safetensors"] if main is calibrate.main else [])
    with pytest.raises(SystemExit):
        main(argv)
    assert "--batch is a number of questions decoded at once: give 1 or more, got 0" in capsys.readouterr().err

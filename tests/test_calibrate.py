"""calibrate's fixed-sequence walk over candidate thresholds, against certified budgets (no models needed)."""
import pytest

from trtllm_autojudge.evaluation.calibrate import Budget, _beyond_budgets, calibrate_ladder, certified, ladder_record
from trtllm_autojudge.evaluation.certificate import upper_bound

N = 300


def row(changed: int, losses: int = 0, questions: int = N) -> dict:
    return {"questions": questions, "answers_changed": changed, "answer_change_bound": upper_bound(changed, questions),
            "gold_losses": losses, "gold_drop_bound": upper_bound(losses, questions), "tokens_per_cycle": 5.0}


def fake_measure(rows: dict):
    """measure(t, open_budgets) from a row per threshold; records the thresholds it ran and the budgets
    still open at each."""
    ran, opened = [], []

    def measure(t, still_open):
        ran.append(t)
        opened.append(list(still_open))
        return rows[t]
    return measure, ran, opened


LADDER = [0.1, 0.2, 0.3, 0.4, 0.5]
ONE = Budget(0.01, 0.01)


def walk(measure, candidates, budgets=(ONE,)):
    chosen, rows = calibrate_ladder(measure, candidates, N, list(budgets))
    return chosen, rows


def test_walks_up_from_the_smallest_and_stops_at_the_first_failure():
    measure, ran, _ = fake_measure({0.1: row(0), 0.2: row(0), 0.3: row(1), 0.4: row(0), 0.5: row(0)})
    chosen, rows = walk(measure, [0.3, 0.1, 0.5, 0.2, 0.4, 0.2])
    assert chosen == {ONE: 0.2} and ran == [0.1, 0.2, 0.3]  # 0.4 and 0.5 would pass, but the sequence stops at 0.3
    assert [(r["threshold"], r["within"]) for r in rows] == [(0.1, [0.01]), (0.2, [0.01]), (0.3, [])]
    assert rows[0]["tokens_per_cycle"] == 5.0  # the measured row is kept whole


def test_none_when_the_smallest_fails_and_the_largest_when_all_pass():
    measure, *_ = fake_measure({t: row(5) for t in LADDER})
    assert walk(measure, LADDER) == ({ONE: None}, [{"threshold": 0.1, "within": [], **row(5)}])
    measure, ran, _ = fake_measure({t: row(0) for t in LADDER})
    assert walk(measure, LADDER)[0] == {ONE: 0.5} and ran == LADDER


def test_each_budget_of_the_ladder_walks_on_until_it_fails():
    """Budgets 1% (no change in 300 allowed), 2% (1) and 5% (8): each keeps the largest candidate
    before its own first failure; the walk ends when the last budget fails, and measure hears which
    budgets are still open (to stop a candidate once beyond all of them)."""
    two, five = Budget(0.02, 0.02), Budget(0.05, 0.05)
    measure, ran, opened = fake_measure({0.1: row(0), 0.2: row(1), 0.3: row(1), 0.4: row(9), 0.5: row(0)})
    chosen, rows = walk(measure, LADDER, (ONE, two, five))
    assert chosen == {ONE: 0.1, two: 0.3, five: 0.3} and ran == [0.1, 0.2, 0.3, 0.4]
    assert opened == [[ONE, two, five], [ONE, two, five], [two, five], [two, five]]
    assert [r["within"] for r in rows] == [[0.01, 0.02, 0.05], [0.02, 0.05], [0.02, 0.05], []]
    assert ladder_record(chosen, rows, [0.01, 0.02, 0.05]) == [
        {"budget": 0.01, "threshold": 0.1, "answers_changed": 0, "answer_change_bound": upper_bound(0, N),
         "gold_losses": 0, "gold_drop_bound": upper_bound(0, N), "vs_lossless": None},
        {"budget": 0.02, "threshold": 0.3, "answers_changed": 1, "answer_change_bound": upper_bound(1, N),
         "gold_losses": 0, "gold_drop_bound": upper_bound(0, N), "vs_lossless": None},
        {"budget": 0.05, "threshold": 0.3, "answers_changed": 1, "answer_change_bound": upper_bound(1, N),
         "gold_losses": 0, "gold_drop_bound": upper_bound(0, N), "vs_lossless": None}]


def test_gold_losses_count_too_and_a_stopped_row_is_not_certified():
    measure, *_ = fake_measure({0.1: row(0), 0.2: row(0, losses=1), 0.3: row(0)})
    assert walk(measure, [0.1, 0.2, 0.3])[0] == {ONE: 0.1}
    measure, *_ = fake_measure({0.1: row(0), 0.2: row(0, questions=N - 1), 0.3: row(0)})
    assert walk(measure, [0.1, 0.2, 0.3])[0] == {ONE: 0.1}  # ran 299 of 300: not certified


def test_certified_is_the_bound_not_the_share():
    """1 change in 300 is a third of a percent observed, but its bound (1.6%) breaks a 1% budget; 0 in
    300 is certified at 1%, 0 in 100 is not (3%)."""
    assert not certified(row(1), N, ONE) and certified(row(1), N, Budget(0.02, 0.02))
    assert certified(row(0), N, ONE) and not certified(row(0, questions=100), 100, ONE)


def test_no_candidates_is_refused():
    with pytest.raises(ValueError, match="at least one candidate"):
        walk(lambda t, b: None, [])


class Same:
    @staticmethod
    def same(a, b):
        return a == b


def test_beyond_budget_counts_the_points_changes_and_losses_against_lossless():
    lossless = [{"spec": "lossless", "qid": q, "answer": "1", "gold_correct": True} for q in "abc"]
    judged = [{"spec": "judge@0.1", "qid": "a", "answer": "1", "gold_correct": True},
              {"spec": "judge@0.1", "qid": "b", "answer": "2", "gold_correct": False},
              {"spec": "judge@0.2", "qid": "c", "answer": "2", "gold_correct": False}]
    runs = lossless + judged
    assert not _beyond_budgets(runs, "judge@0.1", Same, [(1, 1)])
    assert _beyond_budgets(runs, "judge@0.1", Same, [(0, 1)]) and _beyond_budgets(runs, "judge@0.1", Same, [(1, 0)])
    assert not _beyond_budgets(runs, "judge@0.1", Same, [(0, 1), (1, 1)])  # within the larger of two open budgets
    assert not _beyond_budgets(runs, "judge@0.3", Same, [(0, 0)])
    # a response whose rule accepted no mismatch still counts: rounding may have hidden an acceptance
    drifted = lossless + [{"spec": "judge@0.1", "qid": "b", "answer": "2", "gold_correct": False, "judged_accepts": 0}]
    assert _beyond_budgets(drifted, "judge@0.1", Same, [(0, 1)]) and _beyond_budgets(drifted, "judge@0.1", Same, [(1, 0)])


def test_default_questions_are_enough_held_out_training_variants():
    """Without --questions, calibrate draws training-template variants of a seed that the shipped
    files were not trained on, enough of them for the default 1% budgets (299)."""
    from trtllm_autojudge.data.sources import load_problems
    from trtllm_autojudge.evaluation.calibrate import CALIBRATION_SEED, CALIBRATION_VARIANTS, parse_args
    from trtllm_autojudge.tasks import load_task

    args = parse_args(["--task", "gsm8k-program", "--out", "judge.safetensors"])
    assert (args.split, args.seed, args.variants_per_template, args.originals) == (
        "train", CALIBRATION_SEED, CALIBRATION_VARIANTS, False)
    task = load_task("gsm8k-program")
    problems = load_problems(args, task, held_out=True)
    assert len(problems) >= 299 and not {p.question for p in problems} & task.trained_questions()

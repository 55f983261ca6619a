"""calibrate's fixed-sequence walk over candidate thresholds, against certified budgets (no models needed)."""
import pytest

from trtllm_autojudge.evaluation.calibrate import _beyond_budget, calibrate_threshold, certified
from trtllm_autojudge.evaluation.certificate import upper_bound

N = 300


def row(changed: int, losses: int = 0, questions: int = N) -> dict:
    return {"questions": questions, "answers_changed": changed, "answer_change_bound": upper_bound(changed, questions),
            "gold_losses": losses, "gold_drop_bound": upper_bound(losses, questions), "tokens_per_cycle": 5.0}


def fake_measure(rows: dict):
    """measure(t) from a row per threshold; records the thresholds it ran."""
    ran = []

    def measure(t):
        ran.append(t)
        return rows[t]
    return measure, ran


LADDER = [0.1, 0.2, 0.3, 0.4, 0.5]


def test_walks_up_from_the_smallest_and_stops_at_the_first_failure():
    measure, ran = fake_measure({0.1: row(0), 0.2: row(0), 0.3: row(1), 0.4: row(0), 0.5: row(0)})
    chosen, rows = calibrate_threshold(measure, [0.3, 0.1, 0.5, 0.2, 0.4, 0.2], N, 0.01, 0.01)
    assert chosen == 0.2 and ran == [0.1, 0.2, 0.3]  # 0.4 and 0.5 would pass, but the sequence stops at 0.3
    assert [(r["threshold"], r["certified"]) for r in rows] == [(0.1, True), (0.2, True), (0.3, False)]
    assert rows[0]["tokens_per_cycle"] == 5.0  # the measured row is kept whole


def test_none_when_the_smallest_fails_and_the_largest_when_all_pass():
    measure, ran = fake_measure({t: row(5) for t in LADDER})
    assert calibrate_threshold(measure, LADDER, N, 0.01, 0.01) == (None, [{"threshold": 0.1, "certified": False, **row(5)}])
    measure, ran = fake_measure({t: row(0) for t in LADDER})
    assert calibrate_threshold(measure, LADDER, N, 0.01, 0.01)[0] == 0.5 and ran == LADDER


def test_gold_losses_count_too_and_a_stopped_row_is_not_certified():
    measure, _ = fake_measure({0.1: row(0), 0.2: row(0, losses=1), 0.3: row(0)})
    assert calibrate_threshold(measure, [0.1, 0.2, 0.3], N, 0.01, 0.01)[0] == 0.1
    measure, _ = fake_measure({0.1: row(0), 0.2: row(0, questions=N - 1), 0.3: row(0)})
    assert calibrate_threshold(measure, [0.1, 0.2, 0.3], N, 0.01, 0.01)[0] == 0.1  # ran 299 of 300: not certified


def test_certified_is_the_bound_not_the_share():
    """1 change in 300 is a third of a percent observed, but its bound (1.6%) breaks a 1% budget; 0 in
    300 is certified at 1%, 0 in 100 is not (3%)."""
    assert not certified(row(1), N, 0.01, 0.01) and certified(row(1), N, 0.02, 0.02)
    assert certified(row(0), N, 0.01, 0.01) and not certified(row(0, questions=100), 100, 0.01, 0.01)


def test_no_candidates_is_refused():
    with pytest.raises(ValueError, match="at least one candidate"):
        calibrate_threshold(lambda t: None, [], N, 0.01, 0.01)


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
    assert not _beyond_budget(runs, "judge@0.1", Same, (1, 1))
    assert _beyond_budget(runs, "judge@0.1", Same, (0, 1)) and _beyond_budget(runs, "judge@0.1", Same, (1, 0))
    assert not _beyond_budget(runs, "judge@0.3", Same, (0, 0))
    # a response whose rule accepted no mismatch still counts: rounding may have hidden an acceptance
    drifted = lossless + [{"spec": "judge@0.1", "qid": "b", "answer": "2", "gold_correct": False, "judged_accepts": 0}]
    assert _beyond_budget(drifted, "judge@0.1", Same, (0, 1)) and _beyond_budget(drifted, "judge@0.1", Same, (1, 0))


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

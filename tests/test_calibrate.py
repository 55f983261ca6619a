"""calibrate's walk over candidate thresholds, against answer and gold budgets (no models needed)."""
import pytest

from trtllm_autojudge.evaluation.calibrate import calibrate_threshold, within_budget

LOSSLESS = {"agreement": 1.0, "gold_accuracy": 0.90, "tokens_per_cycle": 5.0}


def fake_measure(changed: dict[float, float], gold_drop: dict[float, float] | None = None):
    """measure(t) from answers-changed shares per threshold; records the thresholds it ran."""
    ran = []

    def measure(t):
        ran.append(t)
        row = {"agreement": 1.0 - changed[t], "gold_accuracy": 0.90 - (gold_drop or {}).get(t, 0.0),
               "tokens_per_cycle": 5.0 + t}
        return row, LOSSLESS
    return measure, ran


LADDER = [0.1, 0.2, 0.3, 0.4, 0.5]


def test_walks_up_from_the_start_and_stops_at_the_first_failure():
    measure, ran = fake_measure({0.1: 0, 0.2: 0, 0.3: 0.01, 0.4: 0.03, 0.5: 0.0})
    chosen, rows = calibrate_threshold(measure, LADDER, start=0.19, max_answer_change=0.01, max_gold_drop=0.01)
    assert chosen == 0.3 and ran == [0.2, 0.3, 0.4]  # 0.5 would pass, but the walk stops at 0.4
    assert [(r["threshold"], r["within_budget"]) for r in rows] == [(0.2, True), (0.3, True), (0.4, False)]
    assert rows[1]["tokens_per_cycle"] == 5.3  # the measured row is kept whole


def test_walks_down_when_the_start_fails():
    measure, ran = fake_measure({0.1: 0.0, 0.2: 0.02, 0.3: 0.05, 0.4: 0.1, 0.5: 0.2})
    chosen, _ = calibrate_threshold(measure, LADDER, start=0.4, max_answer_change=0.01, max_gold_drop=0.01)
    assert chosen == 0.1 and ran == [0.4, 0.3, 0.2, 0.1]


def test_none_when_every_candidate_fails_and_the_top_when_all_pass():
    measure, ran = fake_measure(dict.fromkeys(LADDER, 0.5))
    assert calibrate_threshold(measure, LADDER, 0.3, 0.01, 0.01)[0] is None and ran == [0.3, 0.2, 0.1]
    measure, ran = fake_measure(dict.fromkeys(LADDER, 0.0))
    assert calibrate_threshold(measure, LADDER + [0.1], 0.3, 0.0, 0.0)[0] == 0.5 and ran == [0.3, 0.4, 0.5]


def test_gold_budget_counts_too():
    measure, _ = fake_measure(dict.fromkeys(LADDER, 0.0), gold_drop={0.3: 0.02, 0.4: 0.02, 0.5: 0.02})
    assert calibrate_threshold(measure, LADDER, 0.1, 0.01, 0.01)[0] == 0.2


def test_budget_boundaries_are_exact_counts():
    # 1 of 100 answers changed is within a 1% budget, whatever the float rounding of 99/100
    assert within_budget({"agreement": 99 / 100, "gold_accuracy": 0.89}, LOSSLESS, 0.01, 0.01)
    assert not within_budget({"agreement": 98 / 100, "gold_accuracy": 0.90}, LOSSLESS, 0.01, 0.01)
    assert not within_budget({"agreement": 1.0, "gold_accuracy": 0.88}, LOSSLESS, 0.01, 0.01)
    assert within_budget({"agreement": 1.0, "gold_accuracy": 0.95}, LOSSLESS, 0.0, 0.0)  # gold may rise


def test_no_candidates_is_refused():
    with pytest.raises(ValueError, match="at least one candidate"):
        calibrate_threshold(lambda t: None, [], 0.5, 0.01, 0.01)


def test_default_questions_are_held_out_training_variants():
    """Without --questions, calibrate draws training-template variants of a seed that the shipped
    files were not trained on (seed 0's are all trained on, so that default would select nothing)."""
    from trtllm_autojudge.data.sources import load_problems
    from trtllm_autojudge.evaluation.calibrate import CALIBRATION_SEED, parse_args
    from trtllm_autojudge.tasks import load_task

    args = parse_args(["--task", "gsm8k-program", "--out", "judge.safetensors"])
    assert (args.split, args.seed, args.variants_per_template, args.originals) == ("train", CALIBRATION_SEED, 2, False)
    task = load_task("gsm8k-program")
    problems = load_problems(args, task, held_out=True)
    assert len(problems) >= 100 and not {p.question for p in problems} & task.trained_questions()

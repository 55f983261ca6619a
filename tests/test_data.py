"""GSM8K data: answer extraction, the fixed split, JSONL errors, template variants, prompt format."""
from __future__ import annotations

import hashlib
import json
from random import Random

import pytest

from trtllm_autojudge.data import (
    BROKEN_TEMPLATES, EVAL_TEMPLATES, TRAIN_TEMPLATES, canonical_number, final_answer, flexible_answer, is_correct,
    load_jsonl, load_templates, original_problems, response_text, same_answer, strict_answer, variant_problems,
    write_jsonl,
)
from trtllm_autojudge.data.symbolic import numeric, numeric_reference
from trtllm_autojudge.data.templates import load_replacements

EXTRACTION_CASES = [
    # response, strict, flexible, final
    ("So she has 18 eggs.\n#### 18", "18", "18", "18"),
    ("#### 1,234", "1234", "1234", "1234"),
    ("It costs $5.50 in total.\n#### $5.50", None, "5.50", "5.50"),  # strict needs a digit right after '#### '
    ("#### 5.50", "5.50", "5.50", "5.50"),
    ("#### -3", "-3", "-3", "-3"),
    ("The answer is 42.", None, "42", "42"),
    ("He pays $1,200. Then he gets 3 back, so 1197.", None, "1197", "1197"),
    ("#### 7\nbut later I think 9", "7", "9", "7"),  # strict takes the #### line, flexible the last number
    ("#### 12.", "12", "12", "12"),  # trailing '.' dropped
    ("no numbers here", None, None, None),
    ("#### ", None, None, None),
    ("#### 10\n#### 11", "10", "11", "10"),  # the first #### line counts (lm-eval-harness)
]


@pytest.mark.parametrize("response,strict,flexible,final", EXTRACTION_CASES)
def test_answer_extraction_table(response, strict, flexible, final):
    assert strict_answer(response) == strict
    assert flexible_answer(response) == flexible
    assert final_answer(response) == final


def test_answers_compare_as_numbers():
    assert same_answer("18.00", "18") and same_answer("1,000", "1000") and same_answer("$5", "5.0")
    assert not same_answer("18", "19") and not same_answer(None, "1") and not same_answer("1", None)
    assert canonical_number(2.5) == "2.5" and canonical_number(3.0) == "3" and canonical_number("1,200.50") == "1200.5"
    assert is_correct("... so 18 eggs\n#### 18", "18", strict=True)
    assert not is_correct("... so 18 eggs", "18", strict=True) and is_correct("... so 18 eggs", "18")


def test_split_is_fixed_and_disjoint():
    assert set(TRAIN_TEMPLATES).isdisjoint(EVAL_TEMPLATES)
    assert sorted(TRAIN_TEMPLATES + EVAL_TEMPLATES) == list(range(100))
    assert len(EVAL_TEMPLATES) == 30 and set(BROKEN_TEMPLATES) <= set(EVAL_TEMPLATES)
    assert set(load_templates()) == set(range(100))
    train_q = {p.question for p in original_problems("train")}
    eval_q = {p.question for p in original_problems("eval")}
    assert len(train_q) == 70 and len(eval_q) == 30 and train_q.isdisjoint(eval_q)
    variants = variant_problems("train", 2, seed=0)
    assert {p.template_id for p in variants} == set(TRAIN_TEMPLATES)
    assert {p.question for p in variants}.isdisjoint(eval_q)


def test_originals_have_gold_answers():
    problems = original_problems("all")
    assert len(problems) == 100
    # GSM8K test question 0 of the wheel (template 0000): the shark and remoras.
    assert problems[0].gold == "10" and "remoras" in problems[0].question
    assert all(strict_answer(p.answer) is not None and p.source == "original" for p in problems)


def test_variants_agree_with_their_template():
    """Every template renders several fresh instances whose #answer equals the solution's #### line."""
    templates, replacements = load_templates(), load_replacements()
    for tid, template in templates.items():
        if tid in BROKEN_TEMPLATES:
            continue
        problem = template.variant(Random(tid), replacements)
        assert problem is not None, f"template {tid} gave no variant"
        assert same_answer(strict_answer(problem.answer), problem.gold)
        assert "{" not in problem.question and "{" not in problem.answer, f"template {tid} left a slot unfilled"


def test_variant_generation_is_deterministic_and_distinct():
    a = variant_problems("eval", 3, seed=5)
    b = variant_problems("eval", 3, seed=5)
    c = variant_problems("eval", 3, seed=6)
    assert a == b and a != c
    assert len(a) == 3 * (len(EVAL_TEMPLATES) - len(BROKEN_TEMPLATES))
    originals = {p.question for p in original_problems("eval")}
    assert len({p.question for p in a}) == len(a) and not originals & {p.question for p in a}


def test_variant_draws_are_frozen():
    """The shipped adapters, drafts and judges record the (per_template, seed) of the variants they were
    trained or mined on, and held-out sets leave those questions out by drawing them again
    (Task.trained_questions): a change to the random stream of the draws would silently let training
    questions into held-out sets. The digest is that of the draws the shipped artefacts were made
    with; a change that moves it must remake them."""
    digest = hashlib.sha256()
    for split, per_template, seed in (("train", 2, 0), ("eval", 2, 5)):
        for p in variant_problems(split, per_template, seed):
            digest.update(f"{p.template_id}\0{p.question}\0{p.answer}\0{p.gold}\n".encode())
    assert digest.hexdigest() == "77d8380f34b61da0bc14f294dd1045b8c30c14a0fa05dc75f94fc5791f300816"


def test_numeric_matches_its_reference():
    """numeric's shortcuts (ints; words that int() and float() cannot read) change no value: every word
    of the templates' lists, words that float() does read, and random numbers, strings and fractions."""
    def strings(value):
        return [value] if isinstance(value, str) else [s for v in value for s in strings(v)] if isinstance(value, list) else []

    words = strings(list(load_replacements().values()))
    rng = Random(0)
    randoms = [rng.choice([rng.randint(-99, 99), rng.uniform(-9, 9), float(rng.randint(0, 9)), True,
                           f" {rng.randint(-99, 99)} ", f"{rng.uniform(0, 9):.2f}", f"{rng.randint(-9, 9)}/{rng.randint(0, 9)}",
                           "".join(rng.choice("aZ 9./-e_") for _ in range(rng.randint(0, 6)))]) for _ in range(2000)]
    tricky = ["Nan", "nan", "NaN", "Inf", "inf", "Infinity", "in fin ity", "-inf", "1e5", "1_000", "\u0661\u0662", "",
              "  ", "sugar cubes", "3/0", "-3/4", "1/4", "2.50", "Fraction"]
    assert len(words) > 100
    for value in words + randoms + tricky:
        got, want = numeric(value), numeric_reference(value)
        assert type(got) is type(want) and (got == want or repr(got) == repr(want)), value


def test_broken_templates_are_skipped_with_a_reason(caplog):
    with caplog.at_level("INFO", logger="trtllm_autojudge.data.gsm8k"):
        problems = variant_problems("eval", 1)
    assert not {p.template_id for p in problems} & set(BROKEN_TEMPLATES)
    assert "template 0024: no variants" in caplog.text and "template 0095: no variants" in caplog.text
    with pytest.raises(ValueError, match="0095 cannot make variants"):
        load_templates()[95].variant(Random(0), load_replacements())


def test_low_acceptance_template_is_capped():
    """Template 0007 accepts about 1 draw in 3000: a small cap returns None instead of hanging."""
    template = load_templates()[7]
    assert template.variant(Random(0), load_replacements(), max_draws=5) is None


def test_jsonl_round_trip(tmp_path):
    problems = original_problems("eval")[:3] + variant_problems("train", 1)[:2]
    write_jsonl(problems, tmp_path / "p.jsonl")
    assert load_jsonl(tmp_path / "p.jsonl") == problems
    (tmp_path / "u.jsonl").write_text('{"question": "1+1?", "answer": 2}\n\n{"question": "2+2?", "answer": "It is 4.\\n#### 4"}\n')
    user = load_jsonl(tmp_path / "u.jsonl")
    assert [p.gold for p in user] == ["2", "4"] and user[0].template_id is None


@pytest.mark.parametrize("bad_line,message", [
    ("{not json", "not valid JSON"),
    ('["a list"]', "expected a JSON object"),
    ('{"answer": "#### 3"}', "'question' must be a non-empty string"),
    ('{"question": "Q?"}', "'answer' must be"),
    ('{"question": "Q?", "answer": "no final answer"}', "no gold answer"),
])
def test_jsonl_errors_name_the_line(tmp_path, bad_line, message):
    good = json.dumps({"question": "Q?", "answer": "#### 1"})
    path = tmp_path / "bad.jsonl"
    path.write_text(f"{good}\n{good}\n{bad_line}\n")
    with pytest.raises(ValueError, match=f"bad.jsonl:3: .*{message}"):
        load_jsonl(path)


def test_empty_jsonl_is_an_error(tmp_path):
    (tmp_path / "e.jsonl").write_text("\n")
    with pytest.raises(ValueError, match="no problems"):
        load_jsonl(tmp_path / "e.jsonl")


def test_response_text_drops_calculator_annotations():
    answer = "She has 3*4 = <<3*4=12>>12 eggs.\n#### 12"
    assert response_text(answer) == "She has 3*4 = 12 eggs.\n#### 12"


def test_inconsistent_draws_are_rejected(caplog):
    """Template 0062's solution truncates p/100*n1 with int() (28.999... -> 28) on some draws; those
    draws must be redrawn, never returned with a solution that contradicts the gold answer."""
    template, replacements, rng = load_templates()[62], load_replacements(), Random(1)
    with caplog.at_level("DEBUG", logger="trtllm_autojudge.data.templates"):
        problems = [template.variant(rng, replacements) for _ in range(30)]
    assert "template 0062: draw rejected" in caplog.text  # this seed does hit a bad draw
    assert all(same_answer(strict_answer(p.answer), p.gold) for p in problems)


def test_mining_takes_variants_round_by_round_before_the_limit():
    """`mine` orders template variants round by round (every template once before any twice), and
    --limit cuts that order; a user's file without templates keeps its order."""
    import argparse

    from trtllm_autojudge.data.problem import Problem
    from trtllm_autojudge.data.sources import by_round, load_problems
    from trtllm_autojudge.tasks import Gsm8kCotTask

    task = Gsm8kCotTask()
    args = argparse.Namespace(questions=None, split="train", originals=False, variants_per_template=3, seed=4, limit=None)
    major = load_problems(args, task)
    mined = load_problems(args, task, rounds=True)
    assert sorted(p.question for p in mined) == sorted(p.question for p in major)
    templates = list(dict.fromkeys(p.template_id for p in major))
    assert [p.template_id for p in mined[:len(templates)]] == templates  # round 1: every template once
    assert [p.question for p in mined if p.template_id == templates[1]] == \
           [p.question for p in major if p.template_id == templates[1]]  # a template's variants in their order
    args.limit = len(templates) + 2
    assert load_problems(args, task, rounds=True) == mined[:len(templates) + 2]
    mine = [Problem(f"q{i}", "#### 1", "1") for i in range(5)]
    assert by_round(mine) == mine and by_round([]) == []

"""Program answers generated from the GSM-Symbolic templates: each executes to its #answer value."""
from __future__ import annotations

import ast
from random import Random

import pytest

from trtllm_autojudge.data import (
    BROKEN_TEMPLATES, TRAIN_TEMPLATES, canonical_number, load_jsonl, variant_problems, write_jsonl,
)
from trtllm_autojudge.data.programs import (
    ANSWER_NAME, BROKEN_PROGRAM_TEMPLATES, ProgramError, convert_template, program_for, program_problems,
    program_template, run_program,
)
from trtllm_autojudge.data.templates import Template, display, load_replacements, load_templates

CONVERTIBLE = [t for t in range(100) if t not in BROKEN_TEMPLATES and t not in BROKEN_PROGRAM_TEMPLATES]


def code_lines(program: str) -> list[str]:
    return [ln for ln in program.splitlines() if not ln.startswith("#")]


@pytest.mark.parametrize("tid", CONVERTIBLE)
def test_every_convertible_template_executes_to_its_answer(tid):
    """Four fresh variants per template: the program runs, gives #answer, and only its inputs differ."""
    template, replacements, rng = load_templates()[tid], load_replacements(), Random(10_000 + tid)
    program = program_template(tid)
    steps = None
    for _ in range(4):
        instance = template.instance(rng, replacements)
        source = program_for(instance, program)  # raises unless it gives the gold answer
        assert canonical_number(run_program(source)) == instance.problem.gold
        assert source.splitlines()[-1].startswith(f"{ANSWER_NAME} = ")
        ast.parse(source)
        lines = code_lines(source)
        inputs, rest = lines[:len(program.inputs)], lines[len(program.inputs):]
        assert [ln.split(" = ")[0] for ln in inputs] == list(program.inputs)
        for name, line in zip(program.inputs, inputs):  # inputs are copied from the question (or its word's number)
            if name in instance.shown and isinstance(instance.shown[name], (int, str)) and f"{{{name}," in template.question_slots:
                assert display(instance.shown[name]) in instance.problem.question, (name, line)
        # no precomputed numbers: every line after the inputs is the same for every variant
        assert steps is None or rest == steps, "a step holds a variant's number instead of a name"
        steps = rest


@pytest.mark.parametrize("tid", CONVERTIBLE[::7])
def test_words_comments_hold_no_number_operator_or_step_name(tid):
    """The ``words`` style (task gsm8k-program-words): the same code, comments in words only."""
    template, replacements, rng = load_templates()[tid], load_replacements(), Random(20_000 + tid)
    program = program_template(tid)
    for _ in range(3):
        instance = template.instance(rng, replacements)
        worked, words = program_for(instance, program), program_for(instance, program, comments="words")
        assert code_lines(words) == code_lines(worked)  # and so it executes to the gold answer (program_for checks)
        for line in words.splitlines():
            if line.startswith("#"):
                assert any(c.isalpha() for c in line[1:]), line
                assert not any(c.isdigit() or c in "=*/+%$" for c in line), line
                assert not any(w[:1] == "v" and w[1:].isdigit() for w in line.split()), line


def test_an_unknown_comment_style_names_the_choices():
    instance = load_templates()[CONVERTIBLE[0]].instance(Random(0), load_replacements())
    with pytest.raises(ValueError, match="worked, words"):
        program_for(instance, comments="terse")


def test_most_templates_are_convertible_and_exclusions_have_reasons():
    assert all(isinstance(r, str) and r for r in BROKEN_PROGRAM_TEMPLATES.values())
    assert len([t for t in TRAIN_TEMPLATES if t in CONVERTIBLE]) >= 69
    for tid in BROKEN_PROGRAM_TEMPLATES:
        with pytest.raises(ProgramError, match=f"template {tid:04d}"):
            program_template(tid)


def test_a_string_input_is_assigned_as_a_word():
    """Template 0026 chooses 7 or 30 from the drawn word ("week"/"month"): the word is an input."""
    program = program_template(26)
    assert "time_period" in program.inputs
    problem = next(p for p in program_problems("train", 2, seed=3) if p.template_id == 26)
    assert "time_period = '" in problem.answer


def test_tuple_draws_assign_the_numeric_partner():
    """Template 0017 draws (mult_txt, mult_val), e.g. ("twice", 2): the question says the word, the program the number."""
    program = program_template(17)
    assert "mult_val" in program.inputs and "mult_txt" not in program.inputs


def test_program_problems_are_the_variants_with_programs(tmp_path):
    programs = program_problems("train", 2, seed=5)
    variants = variant_problems("train", 2, seed=5)
    assert [p.question for p in programs] == [v.question for v in variants if v.template_id not in BROKEN_PROGRAM_TEMPLATES]
    assert [p.gold for p in programs] == [v.gold for v in variants if v.template_id not in BROKEN_PROGRAM_TEMPLATES]
    assert all(ANSWER_NAME + " = " in p.answer and "####" not in p.answer for p in programs)
    assert program_problems("train", 2, seed=5) == programs
    write_jsonl(programs[:5], tmp_path / "p.jsonl")  # programs keep their gold through JSONL
    assert load_jsonl(tmp_path / "p.jsonl") == programs[:5]


def _template(tmp_path, question: str, init: str, solution: str, answer: str) -> Template:
    path = tmp_path / "t.toml"
    path.write_text(f'id_shuffled = 900\nquestion = "q"\nanswer = "#### 1"\n'
                    f'question_annotated = """{question}\n\n#init:\n{init}\n\n#conditions:\n- True\n\n#answer: {answer}"""\n'
                    f'answer_annotated = """{solution}"""\n')
    return Template.from_toml(path)


def test_a_quantity_the_question_does_not_show_cannot_be_converted(tmp_path):
    template = _template(tmp_path, "Tom has {a,3} apples. How many?", "- $a = range(1, 5)\n- $b = range(1, 5)",
                         "He has {a} + {b} = {a+b}.\n#### {a+b}", "a+b")
    with pytest.raises(ProgramError, match="the question does not show"):
        convert_template(template, template.instance(Random(0), {}))


def test_a_list_in_a_computation_cannot_be_converted(tmp_path):
    template = _template(tmp_path, "Tom has {a,3} apples and {xs,[1, 2]}. How many?",
                         "- $a = range(1, 5)\n- xs = sample(range_list(1, 9), 2)",
                         "He has {a} apples and {xs*a}.\n#### {a}", "a")
    with pytest.raises(ProgramError, match=r"computes with \['xs'\]"):
        convert_template(template, template.instance(Random(0), {}))


def test_a_program_that_misses_the_answer_is_refused():
    template, replacements = load_templates()[1], load_replacements()
    instance = template.instance(Random(0), replacements)
    program = program_template(1)
    wrong = type(instance)(instance.problem.__class__(instance.problem.question, instance.problem.answer,
                                                      str(int(instance.problem.gold) + 1), 1, "variant"),
                           instance.shown, instance.env)
    with pytest.raises(ProgramError, match="the #answer is"):
        program_for(wrong, program)

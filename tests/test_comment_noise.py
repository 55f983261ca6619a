"""Perturbed comments for robust program targets: only comment lines change, the code stays the
program's, and the perturbed lines are the ones reported (the training loss skips them)."""
from random import Random

import pytest

from trtllm_autojudge.data.comment_noise import is_comment, noisy_problems, perturb_program
from trtllm_autojudge.data.programs import program_problems
from trtllm_autojudge.tasks import load_task


@pytest.fixture(scope="module")
def problems():
    return program_problems("train", 3, seed=5)


def _code(program: str) -> list[str]:
    return [line for line in program.split("\n") if not is_comment(line)]


def test_perturbed_programs_keep_their_code_and_name_their_perturbed_lines(problems):
    donors = [line for q in problems for line in q.answer.split("\n") if is_comment(line)]
    rng, changed = Random(0), 0
    for q, sibling in zip(problems, problems[1:] + problems[:1]):
        program, lines = perturb_program(q.answer, sibling.answer, donors, rng, p=0.5)
        old, new = q.answer.split("\n"), program.split("\n")
        assert len(new) == len(old) and _code(program) == _code(q.answer)
        assert all(is_comment(new[i]) for i in lines)  # a perturbed comment is still a comment
        assert {i for i, (a, b) in enumerate(zip(old, new)) if a != b} <= lines
        assert lines or not any(is_comment(line) for line in old)  # at least one line when there are comments
        changed += sum(old[i] != new[i] for i in lines)
    assert changed > len(problems) // 2


def test_noisy_problems_perturb_the_asked_share_and_still_give_the_answer(problems):
    task = load_task("gsm8k-program")
    assert all(not lines and q == p for (q, lines), p in zip(noisy_problems(problems, 0.0, 0.5, 1), problems))
    pairs = noisy_problems(problems, 1.0, 0.5, 1)
    assert all(lines for _, lines in pairs) and [q.question for q, _ in pairs] == [p.question for p in problems]
    for q, _ in pairs[::7]:  # the code is unchanged: it still computes the gold answer
        assert task.checker.same(task.checker.answer(q.answer, q.to_json()), q.gold)
    half = sum(bool(lines) for _, lines in noisy_problems(problems, 0.5, 0.5, 2))
    assert 0.3 * len(problems) < half < 0.7 * len(problems)
    assert noisy_problems(problems, 0.5, 0.5, 2) == noisy_problems(problems, 0.5, 0.5, 2)  # seeded


@pytest.mark.parametrize("share, p", [(1.5, 0.5), (-0.1, 0.5), (0.5, 0.0)])
def test_bad_noise_settings_are_refused(problems, share, p):
    with pytest.raises(ValueError, match="comment noise needs"):
        noisy_problems(problems, share, p, 0)

"""The disk cache of template-variant questions (trtllm_autojudge/data/question_cache.py): equal to a
fresh draw, read back without drawing, redrawn when unreadable or foreign, and keyed by the sources."""
from __future__ import annotations

import json

import pytest

from trtllm_autojudge.cache_dir import CACHE_ENV
from trtllm_autojudge.data import question_cache, variant_problems
from trtllm_autojudge.tasks import Gsm8kCotTask, Gsm8kProgramTask, Task


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """An empty cache folder, and variant_questions' in-process memory cleared before and after."""
    monkeypatch.setenv(CACHE_ENV, str(tmp_path))
    question_cache.variant_questions.cache_clear()
    yield tmp_path / question_cache.FOLDER
    question_cache.variant_questions.cache_clear()


def _forbid_drawing(monkeypatch):
    def explode(*args, **kwargs):
        raise AssertionError("drew variants although the cache holds them")

    monkeypatch.setattr(question_cache, "variant_instances", explode)


def test_cached_questions_equal_a_fresh_draw_and_are_read_back(cache, monkeypatch):
    fresh = tuple(p.question for p in variant_problems("train", 2, 3))
    assert question_cache.variant_questions("train", 2, 3) == fresh
    files = list(cache.glob("variants-*.json"))
    assert [f.name for f in files] == [f"variants-train-2-3-{question_cache.draws_fingerprint()[:16]}.json"]
    question_cache.variant_questions.cache_clear()
    _forbid_drawing(monkeypatch)
    assert question_cache.variant_questions("train", 2, 3) == fresh  # from the file
    assert question_cache.variant_questions("train", 2, 3) == fresh  # from memory


@pytest.mark.parametrize("damage", ["not json {", json.dumps({"questions": ["an old question"]}), "[1, 2]",
                                    "questions: a string"])
def test_an_unreadable_or_foreign_file_is_drawn_again_and_rewritten(cache, caplog, damage):
    fresh = question_cache.variant_questions("eval", 1, 4)
    path = next(cache.glob("variants-*.json"))
    if damage == "questions: a string":  # the right key, but no list of questions
        damage = json.dumps({**{k: v for k, v in json.loads(path.read_text()).items() if k != "questions"},
                             "questions": "abc"})
    path.write_text(damage)
    question_cache.variant_questions.cache_clear()
    with caplog.at_level("WARNING", logger=question_cache.__name__):
        assert question_cache.variant_questions("eval", 1, 4) == fresh
    assert "drawing them again" in caplog.text
    assert json.loads(path.read_text())["questions"] == list(fresh)


def test_an_edit_of_the_sources_makes_a_new_key_and_removes_the_old_files(cache, monkeypatch):
    question_cache.variant_questions("eval", 1, 4)
    old = next(cache.glob("variants-*.json"))
    monkeypatch.setattr(question_cache, "draws_fingerprint", lambda: "f" * 64)
    question_cache.variant_questions.cache_clear()
    question_cache.variant_questions("eval", 1, 4)
    assert [f.name for f in cache.glob("variants-*.json")] == ["variants-eval-1-4-ffffffffffffffff.json"]
    assert not old.exists()


def test_a_cache_that_cannot_be_written_costs_only_the_cache(tmp_path, monkeypatch, caplog):
    blocker = tmp_path / "file"
    blocker.write_text("")
    monkeypatch.setenv(CACHE_ENV, str(blocker))  # a file where the cache folder should be
    question_cache.variant_questions.cache_clear()
    try:
        with caplog.at_level("WARNING", logger=question_cache.__name__):
            questions = question_cache.variant_questions("eval", 1, 4)
    finally:
        question_cache.variant_questions.cache_clear()
    assert questions == tuple(p.question for p in variant_problems("eval", 1, 4))
    assert "cannot cache" in caplog.text


@pytest.mark.parametrize("task", [Gsm8kCotTask(), Gsm8kProgramTask()], ids=lambda t: t.name)
def test_template_tasks_answer_from_the_cache_with_a_superset_of_their_problems(cache, task):
    """What trained_questions gathers: the base class's answer (the task's own problems), or more."""
    cached = task.train_variant_questions(2, 0)
    assert Task.train_variant_questions(task, 2, 0) <= cached
    assert cached == set(question_cache.variant_questions("train", 2, 0))

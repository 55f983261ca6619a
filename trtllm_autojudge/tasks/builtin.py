"""The built-in tasks: ``gsm8k-cot``, ``gsm8k-program``, ``gsm8k-program-words`` and ``code``."""
from __future__ import annotations

import json
from pathlib import Path

from ..data.gsm8k import original_problems, variant_problems
from ..data.problem import Problem
from ..data.programs import BROKEN_PROGRAM_TEMPLATES, PROGRAM_SYSTEM_PROMPT, program_problems
from ..data.prompt import SYSTEM_PROMPT, response_text
from ..data.question_cache import variant_questions
from .base import Task
from .checkers import CodeChecker, GSM8KChecker, ProgramChecker


class TemplateTask(Task):
    """A task whose problems are GSM-Symbolic template variants (:func:`trtllm_autojudge.data.gsm8k.variant_instances`)."""

    def train_variant_questions(self, per_template: int, seed: int) -> set[str]:
        """Every variant's question, from the disk cache (:mod:`trtllm_autojudge.data.question_cache`): a superset of
        a task's problems where it skips templates of its own (the program task's
        ``BROKEN_PROGRAM_TEMPLATES``), which its held-out sets never hold."""
        return set(variant_questions("train", per_template, seed))


class Gsm8kCotTask(TemplateTask):
    """GSM8K answered in words: a worked solution ending in ``#### N`` (the shipped target's task)."""

    name = "gsm8k-cot"
    system_prompt = SYSTEM_PROMPT
    shipped_judge = "judge_gsm8k.safetensors"
    shipped_adapter = "target_lora.safetensors"
    shipped_draft = "draft.safetensors"
    shipped_draft_vocab = "draft_vocab_gsm8k.safetensors"

    def make_checker(self) -> GSM8KChecker:
        return GSM8KChecker()

    def problems(self, split: str, originals: bool, variants_per_template: int, seed: int) -> list[Problem]:
        problems = original_problems(split) if originals else []
        return problems + (variant_problems(split, variants_per_template, seed=seed) if variants_per_template else [])

    def response_text(self, problem: Problem) -> str:
        return response_text(problem.answer)  # without the <<...>> calculator annotations


DEMO_SEED = 1000  # the seed of the held-out instances the program demo runs


class Gsm8kProgramTask(TemplateTask):
    """GSM8K answered by a commented Python program (:mod:`trtllm_autojudge.data.programs`); the
    answer is the value of ``answer`` executed in the sandbox.

    Variants carry their generated program as the answer; original GSM8K questions carry their
    worded solution (they are for evaluation: only their gold answer is used).
    """

    name = "gsm8k-program"
    system_prompt = PROGRAM_SYSTEM_PROMPT
    shipped_judge = "judge_gsm8k_program.safetensors"  # DT-DT1-DT2-LS, minimum run 8: every route runs it
    shipped_adapter = "target_lora_program.safetensors"
    shipped_draft = "draft_program.safetensors"
    shipped_draft_vocab = "draft_vocab_gsm8k_program.safetensors"
    shipped_eagle_head = "eagle_head_program.safetensors"  # build_scripts/train_eagle.py --ship
    shipped_eagle_judge = "judge_gsm8k_program_eagle.safetensors"  # DT, certified on the head's chains of 5
    # the same judge certified at K = 32 and K = 64 (float32, 1,457 and 1,443 questions): docs/notebook/long-windows.md
    shipped_window_judges = {32: "judge_gsm8k_program_k32.safetensors", 64: "judge_gsm8k_program_k64.safetensors"}
    comments = "worked"  # the comment style of the programs (trtllm_autojudge.data.programs.COMMENT_STYLES)

    def make_checker(self) -> ProgramChecker:
        return ProgramChecker()

    def problems(self, split: str, originals: bool, variants_per_template: int, seed: int) -> list[Problem]:
        problems = original_problems(split) if originals else []
        return problems + (program_problems(split, variants_per_template, seed=seed, comments=self.comments)
                           if variants_per_template else [])

    def demo_problems(self, n: int) -> tuple[list[Problem], str]:
        """Fresh instances of the TRAINING templates (seed 1000, one per template, none trained on):
        the programs the tuned target was specialised for, on numbers and names it never saw."""
        seen = self.trained_questions()
        fresh = [p for p in self.problems("train", False, 1, DEMO_SEED) if p.question not in seen]
        return fresh[:n], "held-out instances of the training templates (fresh numbers and names)"

    def response_text(self, problem: Problem) -> str:
        if problem.source == "original":
            raise ValueError("original GSM8K questions have no program to train on: use variants "
                             f"(templates without programs: {sorted(BROKEN_PROGRAM_TEMPLATES) or 'none'})")
        return problem.answer


class Gsm8kProgramWordsTask(Gsm8kProgramTask):
    """The program task with comments in words only (``words``): no number, operator or step name
    in a comment, so the code cannot copy from its comments and a reworded comment leaves the
    answer alone. Its own target, draft and judge; the program vocabulary subset is shared."""

    name = "gsm8k-program-words"
    shipped_judge = "judge_gsm8k_program_words.safetensors"
    shipped_adapter = "target_lora_program_words.safetensors"
    shipped_draft = "draft_program_words.safetensors"
    shipped_eagle_head = None  # the program target's head is not this target's
    comments = "words"


class CodeTask(Task):
    """Code against unit tests: JSONL records ``{"question", "tests"}`` (``answer`` optional: a
    reference solution); the answer is ``pass`` or ``fail`` (gold: ``pass``)."""

    name = "code"
    system_prompt = "Write a Python solution for the task. Answer with one ```python code block."

    def make_checker(self) -> CodeChecker:
        return CodeChecker()

    def load_jsonl(self, path: str | Path) -> list[Problem]:
        problems = []
        with Path(path).open(encoding="utf-8") as f:
            for number, line in enumerate(f, start=1):
                if not line.strip():
                    continue
                try:
                    record = json.loads(line)
                except json.JSONDecodeError as exc:
                    raise ValueError(f"{path}:{number}: not valid JSON ({exc.msg} at column {exc.colno})") from None
                if not isinstance(record, dict) or not isinstance(record.get("question"), str) \
                        or not isinstance(record.get("tests"), str) or not record["tests"].strip():
                    raise ValueError(f"{path}:{number}: a code record needs 'question' and 'tests' (non-empty strings)")
                problems.append(Problem(record["question"], str(record.get("answer", "")), "pass", None, "jsonl",
                                        record["tests"]))
        if not problems:
            raise ValueError(f"{path}: no problems (the file is empty)")
        return problems


BUILTIN_TASKS: dict[str, type[Task]] = {t.name: t for t in (Gsm8kCotTask, Gsm8kProgramTask, Gsm8kProgramWordsTask, CodeTask)}

"""A task as one object (docs/tasks.md): where its problems come from, its prompt format, and
its checker (answer extraction and comparison, with the early-stop rule ``checker.is_final``).

Every verb takes ``--task``; nothing task-specific lives in the miner, the evaluation or the demo.
A task of your own subclasses :class:`Task` and is loaded as ``--task package.module:ClassName``.
"""
from __future__ import annotations

import json
from pathlib import Path

from ..data.jsonl import load_jsonl
from ..data.problem import Problem
from ..data.prompt import chat_training_ids, prompt_ids
from .protocol import TaskChecker

ASSETS = Path(__file__).resolve().parents[1] / "assets"


class Task:
    """Base class of tasks; subclasses set the class attributes and may override the methods.

    Attributes
    ----------
    name : str
        How ``--task`` names it; recorded in feature and judge files.
    system_prompt : str
        The system message of the chat prompt (the instruction).
    checker : TaskChecker
        Reads and compares answers; its ``is_final`` is the task's early-stop rule (always False
        when the answer is only known at the end of a response).
    shipped_judge, shipped_adapter, shipped_draft, shipped_draft_vocab : str | None
        File names under ``trtllm_autojudge/assets`` of what is shipped for the embedded pair on
        this task: the judge, the tuned target's LoRA adapter (``--target tuned``), the draft
        (``--draft embedded``) and its vocabulary subset (``--draft-vocab embedded``). None: none
        is shipped.
    shipped_eagle_head, shipped_eagle_judge : str | None
        File names under ``trtllm_autojudge/assets`` of the tuned target's EAGLE head (``--draft
        eagle``; saved without the target's embedding) and of the judge calibrated on its drafts (the
        default judge with ``--draft eagle``). None: none is shipped.
    shipped_window_judges : dict[int, str]
        {K: file name under ``trtllm_autojudge/assets``} of judges certified for a chain of K draft
        tokens (their certificate's ``k``), the embedded pair's default judge at that ``--k``; other
        windows take ``shipped_judge``.
    """

    name: str = ""
    system_prompt: str = ""
    shipped_judge: str | None = None
    shipped_adapter: str | None = None
    shipped_draft: str | None = None
    shipped_draft_vocab: str | None = None
    shipped_eagle_head: str | None = None
    shipped_eagle_judge: str | None = None
    shipped_window_judges: dict[int, str] = {}

    def __init__(self) -> None:
        self.checker: TaskChecker = self.make_checker()

    def make_checker(self) -> TaskChecker:
        raise NotImplementedError(f"{type(self).__name__} must define make_checker()")

    # ---- where the problems come from ----
    def problems(self, split: str, originals: bool, variants_per_template: int, seed: int) -> list[Problem]:
        """The task's own problems of a template split (``--split``); tasks without any refuse."""
        raise SystemExit(f"task {self.name!r} has no embedded problems: give --questions FILE.jsonl")

    def demo_problems(self, n: int) -> tuple[list[Problem], str]:
        """The ``n`` held-out problems the demo runs, and how to name them: by default the
        evaluation templates' original GSM8K questions."""
        return self.problems("eval", True, 0, 0)[:n], "held-out GSM8K questions (evaluation templates)"

    def load_jsonl(self, path: str | Path) -> list[Problem]:
        """Problems from a user's JSONL file (``--questions``)."""
        return load_jsonl(path)

    # ---- the prompt format ----
    def prompt_ids(self, tokenizer, question: str) -> list[int]:
        return prompt_ids(tokenizer, question, self.system_prompt)

    def response_text(self, problem: Problem) -> str:
        """The response a target is trained on for ``problem``."""
        return problem.answer

    def training_ids(self, tokenizer, problem: Problem) -> tuple[list[int], int]:
        """Prompt + response + end-of-turn as token ids, and the number of prompt tokens."""
        return chat_training_ids(tokenizer, problem.question, self.response_text(problem), self.system_prompt)

    def shipped_judge_path(self, k: int | None = None) -> Path | None:
        """The embedded pair's judge: the one certified for a chain of ``k`` draft tokens where one is
        shipped, else the task's judge (None: none is shipped)."""
        name = self.shipped_window_judges.get(k, self.shipped_judge)
        return ASSETS / name if name else None

    def shipped_eagle_judge_path(self) -> Path | None:
        return ASSETS / self.shipped_eagle_judge if self.shipped_eagle_judge else None

    def shipped_model_path(self, role: str) -> Path:
        """The shipped file of the embedded ``role`` ("adapter", "draft", "draft_vocab" or "eagle_head");
        SystemExit saying how to make it, or what to pass instead, when this task ships none or it is missing."""
        name = {"adapter": self.shipped_adapter, "draft": self.shipped_draft, "draft_vocab": self.shipped_draft_vocab,
                "eagle_head": self.shipped_eagle_head}[role]
        instead, script = {"adapter": ("--target PATH", "train_target_adapter.py"),
                           "draft": ("--draft PATH", "train_draft.py"),
                           "draft_vocab": ("--draft-vocab PATH", "make_draft_vocab.py"),
                           "eagle_head": ("--draft eagle:HEAD", "train_eagle.py")}[role]
        path = ASSETS / name if name else None
        if path is None or not path.is_file():
            missing = f"{name} is not shipped" if name else "no embedded model is made for it"
            raise SystemExit(f"task {self.name}: the embedded {role} ({missing}): make it with "
                             f"`python build_scripts/{script} --task {self.name}`, or pass {instead}")
        return path

    def trained_questions(self) -> set[str]:
        """Questions of the ``train`` split that the shipped adapter and draft were trained on, or
        the shipped judge's labels were mined from, read from the settings (``per_template``,
        ``seed``) in their metadata; held-out sets drop them by question text
        (:func:`~trtllm_autojudge.data.sources.load_problems`)."""
        seen: set[str] = set()
        for name in (self.shipped_adapter, self.shipped_draft, self.shipped_judge,
                     self.shipped_eagle_head):
            for settings in _training_settings(ASSETS / name) if name else []:
                seen |= self.train_variant_questions(settings["per_template"], settings["seed"])
        return seen

    def train_variant_questions(self, per_template: int, seed: int) -> set[str]:
        """The questions of ``problems("train", False, per_template, seed)``, or a superset of them
        (what :meth:`trained_questions` gathers); override it where there is a cheaper way."""
        return {p.question for p in self.problems("train", False, per_template, seed)}


def _training_settings(path: Path) -> list[dict]:
    """The ``per_template`` and ``seed`` settings of the training-split questions recorded in a
    shipped file (an adapter's or draft's ``settings`` metadata, a judge's ``settings`` entry), and
    those of the adapter it continued (``settings["init"]``, recursively); [] when the file is
    missing or records none."""
    if not path.is_file():
        return []
    from safetensors import safe_open

    with safe_open(str(path), framework="np") as f:
        meta = f.metadata() or {}
    recorded = json.loads(meta.get("autojudge") or meta.get("autojudge_eagle_head") or "{}")  # a judge's, a head's
    settings = json.loads(meta["settings"]) if "settings" in meta else recorded.get("settings", {})
    chain = []
    while isinstance(settings, dict):
        if {"per_template", "seed"} <= settings.keys():
            chain.append(settings)
        settings = settings.get("init")
    return chain

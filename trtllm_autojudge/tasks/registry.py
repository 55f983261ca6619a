"""Tasks by name (``gsm8k-cot``, ``gsm8k-program``, ``gsm8k-program-words``, ``code``) or import path, and the ``--task`` argument."""
from __future__ import annotations

import argparse
import importlib

from .base import Task
from .builtin import BUILTIN_TASKS

DEFAULT_TASK = "gsm8k-cot"


def load_task(spec: str) -> Task:
    """A built-in task by name, or ``package.module:ClassName`` (a :class:`Task` subclass, made without arguments)."""
    if spec in BUILTIN_TASKS:
        return BUILTIN_TASKS[spec]()
    if ":" not in spec:
        raise ValueError(f"unknown task {spec!r}: use one of {sorted(BUILTIN_TASKS)} or 'package.module:ClassName'")
    module, cls = spec.split(":", 1)
    try:
        task = getattr(importlib.import_module(module), cls)()
    except (ImportError, AttributeError) as e:
        raise ValueError(f"cannot load task {spec!r}: {e}") from e
    missing = [a for a in ("name", "checker", "problems", "load_jsonl", "prompt_ids") if not hasattr(task, a)]
    if missing:
        raise ValueError(f"task {spec!r} lacks {missing}: subclass trtllm_autojudge.tasks.Task")
    return task


class _RemovedChecker(argparse.Action):
    def __call__(self, parser, namespace, values, option_string=None):
        parser.error("--checker was replaced by --task (gsm8k -> --task gsm8k-cot, code -> --task code, "
                     "module:Checker -> --task module:Task, a trtllm_autojudge.tasks.Task subclass); see docs/tasks.md")


def add_task_args(parser: argparse.ArgumentParser, default: str = DEFAULT_TASK) -> None:
    parser.add_argument("--task", default=default,
                        help=f"{', '.join(BUILTIN_TASKS)}, or package.module:Class (default {default}; see docs/tasks.md)")
    parser.add_argument("--checker", action=_RemovedChecker, help=argparse.SUPPRESS)


def task_from_args(args: argparse.Namespace) -> Task:
    try:
        return load_task(args.task)
    except ValueError as e:
        raise SystemExit(f"--task: {e}") from None

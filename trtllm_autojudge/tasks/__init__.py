"""Tasks: problems, prompt format and checker as one object (``--task`` on every verb)."""
from .base import Task
from .builtin import BUILTIN_TASKS, CodeTask, Gsm8kCotTask, Gsm8kProgramTask
from .registry import DEFAULT_TASK, add_task_args, load_task, task_from_args

__all__ = ["BUILTIN_TASKS", "CodeTask", "DEFAULT_TASK", "Gsm8kCotTask", "Gsm8kProgramTask", "Task", "add_task_args",
           "load_task", "task_from_args"]

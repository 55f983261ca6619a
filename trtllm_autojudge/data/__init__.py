"""GSM8K data for the embedded pipeline: questions, template variants (worked solutions or programs),
the fixed template split, JSONL I/O, answer checking (lm-eval-harness conventions) and the prompt format."""
from .answers import canonical_number, final_answer, flexible_answer, is_correct, normalize_answer, same_answer, strict_answer
from .gsm8k import original_problems, variant_problems
from .jsonl import load_jsonl, write_jsonl
from .problem import Problem
from .programs import BROKEN_PROGRAM_TEMPLATES, PROGRAM_SYSTEM_PROMPT, program_problems
from .prompt import SYSTEM_PROMPT, prompt_ids, prompt_text, response_text, training_ids
from .split import EVAL_TEMPLATES, TRAIN_TEMPLATES, split_templates
from .templates import BROKEN_TEMPLATES, load_templates

__all__ = [
    "BROKEN_PROGRAM_TEMPLATES", "BROKEN_TEMPLATES", "EVAL_TEMPLATES", "PROGRAM_SYSTEM_PROMPT", "Problem", "SYSTEM_PROMPT", "TRAIN_TEMPLATES", "canonical_number",
    "final_answer", "flexible_answer", "is_correct", "load_jsonl", "load_templates", "normalize_answer",
    "original_problems", "program_problems", "prompt_ids", "prompt_text", "response_text", "same_answer", "split_templates",
    "strict_answer", "training_ids", "variant_problems", "write_jsonl",
]

"""The prompt format of the embedded models: the tokenizer's chat template (SmolLM2-Instruct's
ChatML), a system message with the task's instruction, the question as the user turn.

Each task has its own system message (``system=``); the default is the worded task's
(``gsm8k-cot``), whose expected response is a GSM8K worked solution without calculator annotations
(``<<48/2=24>>`` removed: 25% fewer tokens, same text otherwise) ending in ``#### N``, then the
end-of-turn token. The tuned target is trained on exactly this (:func:`training_ids`).
"""
from __future__ import annotations

import re

SYSTEM_PROMPT = "Solve the math word problem step by step. Finish with a line '#### N', where N is the final number."

_CALCULATOR_RE = re.compile(r"<<[^>]*>>")


def prompt_messages(question: str, system: str = SYSTEM_PROMPT) -> list[dict[str, str]]:
    return [{"role": "system", "content": system}, {"role": "user", "content": question.strip()}]


def _chat(tokenizer, messages, add_generation_prompt: bool) -> str:
    if not getattr(tokenizer, "chat_template", None):
        raise ValueError(f"{type(tokenizer).__name__} has no chat template: the prompt format needs an instruct model's tokenizer")
    return tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=add_generation_prompt)


def prompt_text(tokenizer, question: str, system: str = SYSTEM_PROMPT) -> str:
    """The prompt as text, ending with the assistant turn's header."""
    return _chat(tokenizer, prompt_messages(question, system), add_generation_prompt=True)


def prompt_ids(tokenizer, question: str, system: str = SYSTEM_PROMPT) -> list[int]:
    """Token ids of the prompt for ``question`` (what generation starts from)."""
    return tokenizer(prompt_text(tokenizer, question, system), add_special_tokens=False).input_ids


def response_text(answer: str) -> str:
    """The response the tuned target learns: the worked answer without ``<<...>>`` annotations."""
    return "\n".join(line.rstrip() for line in _CALCULATOR_RE.sub("", answer.strip()).splitlines())


def training_ids(tokenizer, question: str, answer: str) -> tuple[list[int], int]:
    """Prompt + worked response (:func:`response_text`) + end-of-turn, as token ids, and the number of prompt tokens."""
    return chat_training_ids(tokenizer, question, response_text(answer), SYSTEM_PROMPT)


def chat_training_ids(tokenizer, question: str, response: str, system: str) -> tuple[list[int], int]:
    """Prompt (with ``system``) + ``response`` + end-of-turn, as token ids, and the number of prompt tokens."""
    prompt = prompt_ids(tokenizer, question, system)
    full = _chat(tokenizer, prompt_messages(question, system) + [{"role": "assistant", "content": response}], False)
    # ChatML closes the turn with "<|im_end|>\n": the model learns up to the end-of-turn token.
    ids = tokenizer(full.rstrip("\n"), add_special_tokens=False).input_ids
    if ids[: len(prompt)] != prompt:
        raise ValueError("the chat template does not extend the prompt with the response; training_ids cannot split them")
    return ids, len(prompt)

"""Token classes of a mismatch (research tools): comment or code line, digit / word / operator /
question word for each token, on a word-level tokenizer."""
import numpy as np

from trtllm_autojudge.judge.token_class import (COLUMNS, line_before, question_words, swap_class,
                                                token_class_features)

WORDS = ["\n", "# ", "miners", "days", "x", " = ", "5", "*", "47", " "]


class Words:
    """Token i decodes to WORDS[i]."""

    def decode(self, ids):
        return "".join(WORDS[i] for i in ids)


def ids(*words):
    return [WORDS.index(w) for w in words]


def test_the_line_and_its_kind():
    tok = Words()
    comment = ids("x", " = ", "5", "\n", "# ", "miners")  # line 2 is a comment
    assert line_before(tok, comment, 5) == "# "
    assert swap_class(tok, comment, 5, WORDS.index("days"), WORDS.index("miners")) == ("comment", "word")
    code = ids("# ", "miners", "\n", "x", " = ", "47")
    assert line_before(tok, code, 5) == "x = "
    assert swap_class(tok, code, 5, WORDS.index("5"), WORDS.index("47")) == ("code", "digit")
    assert swap_class(tok, code, 4, WORDS.index("*"), WORDS.index(" = ")) == ("code", "word")


def test_features_follow_the_columns():
    tok, question = Words(), question_words("How many days do 47 miners need? X")
    assert question == {"how", "many", "days", "do", "miners", "need"}  # single letters are not words
    tokens = ids("# ", "miners", "\n", "x", " = ", "5", "*", "47")
    cases = {  # (index, draft, target) -> the columns that are 1
        (1, "days", "miners"): {"comment_line", "draft_word", "draft_in_question", "target_word", "target_in_question"},
        (5, "47", "5"): {"draft_digit", "target_digit"},
        (6, " = ", "*"): {"draft_operator", "target_operator"},
        (3, "x", "days"): {"draft_word", "target_word", "target_in_question"},
    }
    for (index, draft, target), ones in cases.items():
        row = token_class_features(tok, tokens, index, WORDS.index(draft), WORDS.index(target), question)
        assert row.dtype == np.float32 and row.shape == (len(COLUMNS),)
        assert {c for c, v in zip(COLUMNS, row) if v} == ones, (draft, target)

"""The BLS's request settings without a server: defaults, and each refusal naming the input and limit."""
import math

import numpy as np
import pytest

from trtllm_autojudge.trt.engine.io_spec import EngineBlock
from trtllm_autojudge.trt.runner.packing import chain_tree
from trtllm_autojudge.trt.triton.request_settings import RequestSettings, check_context, read_settings

TREE = chain_tree(6, 2)
BLOCK = EngineBlock(judge_file="j", plugin_library="", max_requests=1, max_draft_nodes=TREE.num_nodes,
                    max_paths=len(TREE.paths), max_path_len=7)


CERTIFICATE = {"threshold": 0.25, "max_answer_change": 0.01, "task": "gsm8k-program", "dtype": "float32", "k": 4,
               "tree": None, "max_new_tokens": 320,
               "ladder": [{"budget": 0.005, "threshold": None}, {"budget": 0.01, "threshold": 0.25},
                          {"budget": 0.02, "threshold": 0.4}]}


def settings(decoupled=True, certificate=CERTIFICATE, **inputs):
    return read_settings(lambda name: None if name not in inputs else np.asarray([inputs[name]]), BLOCK, 0.25,
                         decoupled, certificate)


def test_defaults_are_the_judges_threshold_and_the_longest_path():
    assert settings(max_tokens=5) == RequestSettings(max_tokens=5, threshold=0.25, depth=6, width=1, stream=False)
    assert settings(max_tokens=5, threshold=0.0, num_draft_tokens=2, draft_width=2, stream=True) == \
        RequestSettings(5, 0.0, 2, 2, True)


@pytest.mark.parametrize("inputs, message", [
    ({}, "the request lacks the input 'max_tokens'"),
    ({"max_tokens": 0}, "max_tokens must be at least 1, got 0"),
    ({"max_tokens": 4, "threshold": math.nan}, r"threshold must lie in \[0, 1\] \(0 = lossless, judge off\), got nan"),
    ({"max_tokens": 4, "threshold": 1.5}, r"threshold must lie in \[0, 1\] .* got 1.5"),
    ({"max_tokens": 4, "num_draft_tokens": 7}, r"num_draft_tokens must lie in 1..6 \(the engine's longest path\), got 7"),
    ({"max_tokens": 4, "num_draft_tokens": 0}, "num_draft_tokens must lie in 1..6"),
    ({"max_tokens": 4, "draft_width": 3}, "draft_width 3 makes 18 draft nodes on 13 paths; the engine takes at most "
                                          "12 nodes on 7 paths"),
])
def test_a_bad_setting_is_refused_by_name(inputs, message):
    with pytest.raises(ValueError, match=message):
        settings(**inputs)


def test_an_answer_budget_takes_its_certified_rung():
    """answer_budget: the threshold the served judge's certificate proves within that share, for the
    chain it was certified on."""
    assert settings(max_tokens=5, answer_budget=0.02, num_draft_tokens=4).threshold == 0.4
    assert settings(max_tokens=5, answer_budget=0.01, num_draft_tokens=4).threshold == 0.25


@pytest.mark.parametrize("inputs, certificate, message", [
    ({"answer_budget": 0.005, "num_draft_tokens": 4}, CERTIFICATE,
     r"certifies the answer budgets 0.01 \(threshold 0.25\), 0.02 \(threshold 0.4\), not 0.005; no threshold was "
     r"certified within 0.005"),
    ({"answer_budget": 0.02}, CERTIFICATE, r"holds for gsm8k-program, float32, K = 4, 320 new tokens, and this request "
                                           r"drafts num_draft_tokens 6 with draft_width 1: ask for num_draft_tokens 4"),
    ({"answer_budget": 0.02, "num_draft_tokens": 4}, None, "the served judge has no certificate"),
    ({"answer_budget": 1.5, "num_draft_tokens": 4}, CERTIFICATE, r"give a number in \(0, 1\), got 1.5"),
    ({"answer_budget": 0.02, "threshold": 0.3}, CERTIFICATE, "threshold and answer_budget both set"),
])
def test_an_answer_budget_the_judge_does_not_certify_is_refused(inputs, certificate, message):
    with pytest.raises(ValueError, match=message):
        settings(max_tokens=5, certificate=certificate, **inputs)


def test_stream_needs_a_decoupled_bls():
    with pytest.raises(ValueError, match="stream needs a decoupled autojudge_bls"):
        settings(decoupled=False, max_tokens=4, stream=True)


def test_the_prompt_answer_and_last_draft_must_fit_the_context():
    s = settings(max_tokens=10, num_draft_tokens=4)
    check_context(50, s, 64)
    check_context(5000, s, None)  # an engine that does not say: it checks itself
    with pytest.raises(ValueError, match="text_input is 51 tokens; with max_tokens 10 and num_draft_tokens 4 the "
                                         "request needs 65 positions, and the target's context holds 64"):
        check_context(51, s, 64)
    with pytest.raises(ValueError, match="text_input is empty"):
        check_context(0, s, 64)

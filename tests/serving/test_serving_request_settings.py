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


def settings(decoupled=True, **inputs):
    return read_settings(lambda name: None if name not in inputs else np.asarray([inputs[name]]), BLOCK, 0.25,
                         decoupled)


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

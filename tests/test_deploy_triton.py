"""Triton model repository: generation, every config.pbtxt parsed against Triton's ModelConfig."""
import importlib.util
import py_compile
import runpy
from pathlib import Path

import numpy as np
import pytest

from trtllm_autojudge.decoding.acceptance import Acceptance
from trtllm_autojudge.trt.runner.packing import chain_tree, pack_cycle
from trtllm_autojudge.trt.triton.pbtxt import Enum, parameters, to_pbtxt
from trtllm_autojudge.trt.triton.config import MODELS
from trtllm_autojudge.trt.triton.tensors import (acceptance_to_tensors, cycle_to_tensors, tensors_to_acceptance,
                                            tensors_to_cycle)

REPO = Path(__file__).resolve().parents[1]


def model_config_pb2():
    """tritonclient's generated ModelConfig module, loaded from its file: importing it as
    tritonclient.grpc.model_config_pb2 runs tritonclient.grpc/__init__, which needs grpcio."""
    spec = importlib.util.find_spec("tritonclient")
    if spec is None:
        pytest.skip("tritonclient is not installed (pip install tritonclient): it carries Triton's ModelConfig schema")
    path = Path(list(spec.submodule_search_locations)[0]) / "grpc" / "model_config_pb2.py"
    module_spec = importlib.util.spec_from_file_location("triton_model_config_pb2", path)
    module = importlib.util.module_from_spec(module_spec)
    module_spec.loader.exec_module(module)
    return module


def parse(pb2, text):
    from google.protobuf import text_format

    return text_format.Parse(text, pb2.ModelConfig())


def test_generated_repository_parses_against_model_config(tmp_path):
    pb2 = model_config_pb2()
    main = runpy.run_path(str(REPO / "build_scripts" / "make_triton_repo.py"))["main"]
    assert main(["--output_dir", str(tmp_path / "repo"), "--draft_engine_dir", str(tmp_path / "engines/draft"),
                 "--target_engine_dir", str(tmp_path / "engines/target"), "--tokenizer_dir", str(tmp_path / "hf"),
                 "--max_batch_size", "16", "--bls_instances", "2"]) == 0
    configs = sorted((tmp_path / "repo").glob("*/config.pbtxt"))
    assert sorted(p.parent.name for p in configs) == sorted(MODELS)
    parsed = {p.parent.name: parse(pb2, p.read_text()) for p in configs}  # a config that does not parse fails here
    for name, cfg in parsed.items():
        assert cfg.name == name
    draft = parsed["tensorrt_llm_draft"]
    assert draft.backend == "tensorrtllm" and draft.max_batch_size == 16
    assert draft.parameters["gpt_model_path"].string_value == str(tmp_path / "engines/draft")
    assert draft.parameters["gpt_model_type"].string_value == "inflight_fused_batching"
    assert {i.name for i in draft.input} >= {"input_ids", "input_lengths", "request_output_len", "return_generation_logits"}
    assert {o.name for o in draft.output} == {"output_ids", "sequence_length", "generation_logits"}
    target = parsed["autojudge_target"]
    assert target.backend == "python" and target.instance_group[0].kind == pb2.ModelInstanceGroup.KIND_GPU
    assert {o.name for o in target.output} == {"accepted_tokens", "accepted_lens", "best_path", "judged_count"}
    bls = parsed["autojudge_bls"]
    optional = {i.name for i in bls.input if i.optional}
    assert optional == {"threshold", "num_draft_tokens", "draft_width"}  # the request parameters
    assert {o.name for o in bls.output} >= {"text_output", "accepted_lengths", "judged_counts", "cycles"}
    assert bls.parameters["draft_model_name"].string_value == "tensorrt_llm_draft"
    assert bls.parameters["target_model_name"].string_value == "autojudge_target"
    assert bls.instance_group[0].count == 2
    for name in ("preprocessing", "postprocessing", "autojudge_target", "autojudge_bls"):
        model_py = tmp_path / "repo" / name / "1" / "model.py"
        py_compile.compile(str(model_py), doraise=True)  # they import Triton's module, so compile only
        assert "class TritonPythonModel" in model_py.read_text()


def test_a_config_with_a_wrong_field_does_not_parse():
    pb2 = model_config_pb2()
    from google.protobuf import text_format

    good = to_pbtxt({"name": "m", "backend": "python", "input": [{"name": "x", "data_type": Enum("TYPE_INT32"),
                                                                   "dims": [-1]}]})
    assert parse(pb2, good).input[0].data_type == pb2.TYPE_INT32
    with pytest.raises(text_format.ParseError):
        parse(pb2, good.replace("TYPE_INT32", "TYPE_INT33"))
    with pytest.raises(text_format.ParseError):
        parse(pb2, to_pbtxt({"name": "m", "max_batch_sizes": 4}))


def test_pbtxt_writer():
    text = to_pbtxt({"name": "a\"b", "flag": True, "dims": [1, -1], "nested": {"shape": []},
                     "parameters": parameters({"k": 3})})
    assert 'name: "a\\"b"' in text and "flag: true" in text and "dims: [ 1, -1 ]" in text
    assert 'parameters {\n  key: "k"\n  value {\n    string_value: "3"\n  }\n}' in text


def test_cycle_and_acceptance_tensors_round_trip():
    cycle = pack_cycle([[4, 5], [6]], chain_tree(2, 2), np.array([[1, 2, 3, 4], [5, 6, 7, 8]]), np.array([4, 4]),
                       np.array([0.1, 0.9]))
    back = tensors_to_cycle(cycle_to_tensors(cycle))
    for name in ("input_ids", "position_ids", "context_lengths", "row_request", "node_rows", "draft_tokens",
                 "draft_lens", "paths", "threshold"):
        np.testing.assert_array_equal(getattr(back, name), getattr(cycle, name))
    acc = Acceptance(np.array([2, 0], np.int32), np.array([1, 0], np.int32), np.array([[1, 3, 9], [5, -1, -1]], np.int32),
                     np.array([1, 0], np.int32))
    again = tensors_to_acceptance(acceptance_to_tensors(acc))
    assert again.tokens(0) == [1, 3, 9] and again.tokens(1) == [5] and again.judged_count.tolist() == [1, 0]
    with pytest.raises(ValueError, match="lacks"):
        tensors_to_cycle({"input_ids": cycle.input_ids})

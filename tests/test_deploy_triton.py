"""Triton model repository: generation, every config.pbtxt parsed against Triton's ModelConfig."""
import importlib.util
import py_compile
import runpy
from pathlib import Path

import numpy as np
import pytest

from trtllm_autojudge.spec.acceptance import Acceptance
from trtllm_autojudge.trt.runner.packing import chain_tree, pack_cycle
from trtllm_autojudge.trt.triton.config import MODELS
from trtllm_autojudge.trt.triton.pbtxt import Enum, parameters, to_pbtxt
from trtllm_autojudge.trt.triton.stock import STOCK_MODELS, make_stock_repository
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


# ---------------------------------------------------------------------------------------------
# Stock route: tensorrtllm_backend's own models with the draft-target parameters filled in.

def fake_backend_models(root: Path) -> Path:
    """Templates shaped like tensorrtllm_backend's inflight_batcher_llm configs (written here, not
    copied): placeholders in numbers, enums, booleans and strings, and one this tool does not know."""
    def param(key):
        return f'parameters: {{\n  key: "{key}"\n  value: {{\n    string_value: "${{{key}}}"\n  }}\n}}\n'

    engine = ('name: "tensorrt_llm"\nbackend: "${triton_backend}"\nmax_batch_size: ${triton_max_batch_size}\n'
              'model_transaction_policy {\n  decoupled: ${decoupled_mode}\n}\n'
              'dynamic_batching {\n  max_queue_delay_microseconds: ${max_queue_delay_microseconds}\n}\n'
              'input [\n  {\n    name: "input_ids"\n    data_type: TYPE_INT32\n    dims: [ -1 ]\n  },\n'
              '  {\n    name: "draft_input_ids"\n    data_type: TYPE_INT32\n    dims: [ -1 ]\n    optional: true\n  }\n]\n'
              'output [\n  {\n    name: "generation_logits"\n    data_type: ${logits_datatype}\n    dims: [ -1, -1, -1 ]\n'
              '  }\n]\n' + "".join(param(k) for k in ("engine_dir", "enable_kv_cache_reuse", "gpu_device_ids",
                                                       "kv_cache_free_gpu_mem_fraction", "lora_cache_max_adapter_size")))
    python = lambda name, count: (f'name: "{name}"\nbackend: "python"\nmax_batch_size: ${{triton_max_batch_size}}\n'  # noqa: E731
                                  f'instance_group [\n  {{\n    count: ${{{count}}}\n    kind: KIND_CPU\n  }}\n]\n')
    configs = {
        "tensorrt_llm": engine,
        "preprocessing": python("preprocessing", "preprocessing_instance_count") + param("tokenizer_dir"),
        "postprocessing": python("postprocessing", "postprocessing_instance_count") + param("tokenizer_dir"),
        "tensorrt_llm_bls": python("tensorrt_llm_bls", "bls_instance_count") + "".join(
            param(k) for k in ("tensorrt_llm_model_name", "tensorrt_llm_draft_model_name", "accumulate_tokens")),
    }
    for name, text in configs.items():
        (root / name / "1").mkdir(parents=True)
        (root / name / "config.pbtxt").write_text(text)
        if name != "tensorrt_llm":
            (root / name / "1" / "model.py").write_text(f"# {name}: tensorrtllm_backend's model\n")
    return root


def test_stock_repository_fills_the_backends_own_models(tmp_path):
    pb2 = model_config_pb2()
    backend = fake_backend_models(tmp_path / "inflight_batcher_llm")
    main = runpy.run_path(str(REPO / "build_scripts" / "make_triton_repo.py"))["main"]
    assert main(["--route", "stock", "--output_dir", str(tmp_path / "repo"), "--backend_models_dir", str(backend),
                 "--draft_engine_dir", str(tmp_path / "e/draft"), "--target_engine_dir", str(tmp_path / "e/target"),
                 "--tokenizer_dir", str(tmp_path / "hf"), "--max_batch_size", "4", "--target_gpus", "0,1"]) == 0
    parsed = {p.parent.name: parse(pb2, p.read_text()) for p in (tmp_path / "repo").glob("*/config.pbtxt")}
    assert sorted(parsed) == sorted(STOCK_MODELS)
    for name, cfg in parsed.items():
        assert cfg.name == name and cfg.max_batch_size == 4
    target, draft, bls = parsed["tensorrt_llm"], parsed["tensorrt_llm_draft"], parsed["tensorrt_llm_bls"]
    assert target.backend == draft.backend == "tensorrtllm" and not target.model_transaction_policy.decoupled
    assert target.parameters["engine_dir"].string_value == str(tmp_path / "e/target")
    assert draft.parameters["engine_dir"].string_value == str(tmp_path / "e/draft")
    for engine in (target, draft):
        assert engine.parameters["enable_kv_cache_reuse"].string_value == "true"  # the draft-target target needs it
        assert engine.output[0].data_type == pb2.TYPE_FP32
        assert engine.parameters["lora_cache_max_adapter_size"].string_value == "${lora_cache_max_adapter_size}"
    assert target.parameters["gpu_device_ids"].string_value == "0,1"
    assert draft.parameters["gpu_device_ids"].string_value == "${gpu_device_ids}"  # unset: the backend's default
    assert bls.parameters["tensorrt_llm_model_name"].string_value == "tensorrt_llm"
    assert bls.parameters["tensorrt_llm_draft_model_name"].string_value == "tensorrt_llm_draft"  # the BLS's DTM loop
    assert bls.instance_group[0].count == 4
    assert (tmp_path / "repo/tensorrt_llm_bls/1/model.py").read_text().startswith("# tensorrt_llm_bls")  # copied


def test_stock_repository_refuses_templates_it_cannot_fill(tmp_path):
    backend = fake_backend_models(tmp_path / "b")
    (backend / "preprocessing" / "config.pbtxt").write_text('name: "preprocessing"\nmax_batch_size: ${new_knob}\n')
    kwargs = dict(draft_engine_dir="d", target_engine_dir="t", tokenizer_dir="k")
    with pytest.raises(ValueError, match=r"no value for \['new_knob'\]"):
        make_stock_repository(tmp_path / "repo", backend, **kwargs)
    with pytest.raises(FileNotFoundError, match="all_models/inflight_batcher_llm"):
        make_stock_repository(tmp_path / "repo", tmp_path / "nowhere", **kwargs)
    main = runpy.run_path(str(REPO / "build_scripts" / "make_triton_repo.py"))["main"]
    with pytest.raises(SystemExit):
        main(["--route", "stock", "--output_dir", "o", "--draft_engine_dir", "d", "--target_engine_dir", "t",
              "--tokenizer_dir", "k"])  # no --backend_models_dir

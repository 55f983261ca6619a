"""Triton model repository: generation, every config.pbtxt parsed against Triton's ModelConfig."""
import importlib.util
import py_compile
import re
import runpy
from pathlib import Path

import numpy as np
import pytest

from trtllm_autojudge.judge.head import JudgeHead, feature_dim
from trtllm_autojudge.spec.acceptance import Acceptance
from trtllm_autojudge.trt.engine.routes import check_route_judge
from trtllm_autojudge.trt.runner.packing import chain_tree, pack_cycle
from trtllm_autojudge.trt.triton.config import MODELS, check_draft_width, repository_configs
from trtllm_autojudge.trt.triton.pbtxt import Enum, parameters, to_pbtxt
from trtllm_autojudge.trt.triton.stock import (STOCK_MODELS, TEMPLATES_SUBDIR, fill_template, make_stock_repository,
                                               stock_parameters, template_dir)
from trtllm_autojudge.trt.triton.tensors import (CYCLE_TENSORS, acceptance_to_tensors, cycle_to_tensors,
                                                 tensors_to_acceptance, tensors_to_cycle)

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
    assert {i.name for i in target.input if i.optional} == {"greedy_child"}  # sent for a lookahead judge only
    assert {o.name for o in target.output} == {"accepted_tokens", "accepted_lens", "best_path", "judged_count"}
    bls = parsed["autojudge_bls"]
    optional = {i.name for i in bls.input if i.optional}
    assert optional == {"threshold", "answer_budget", "num_draft_tokens", "draft_width", "stream"}  # request parameters
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


@pytest.mark.parametrize("lookahead", [False, True])
def test_cycle_and_acceptance_tensors_round_trip(lookahead):
    cycle = pack_cycle([[4, 5], [6]], chain_tree(2, 2), np.array([[1, 2, 3, 4], [5, 6, 7, 8]]), np.array([4, 4]),
                       np.array([0.1, 0.9]), greedy_child=lookahead)
    tensors = cycle_to_tensors(cycle)
    assert ("greedy_child" in tensors) == lookahead  # an optional input, sent only for a lookahead judge
    # the target model reads every input by name; an absent optional one comes back as None
    back = tensors_to_cycle({name: tensors.get(name) for name in CYCLE_TENSORS})
    for name in ("input_ids", "position_ids", "context_lengths", "row_request", "node_rows", "draft_tokens",
                 "draft_lens", "paths", "threshold") + (("greedy_child",) if lookahead else ()):
        np.testing.assert_array_equal(getattr(back, name), getattr(cycle, name))
    assert (back.greedy_child is None) != lookahead and back.draft_hidden is None
    acc = Acceptance(np.array([2, 0], np.int32), np.array([1, 0], np.int32), np.array([[1, 3, 9], [5, -1, -1]], np.int32),
                     np.array([1, 0], np.int32))
    again = tensors_to_acceptance(acceptance_to_tensors(acc))
    assert again.tokens(0) == [1, 3, 9] and again.tokens(1) == [5] and again.judged_count.tolist() == [1, 0]
    with pytest.raises(ValueError, match="lacks"):
        tensors_to_cycle({"input_ids": cycle.input_ids})


def test_the_context_repository_serves_target_only_judges():
    """Its draft is the stock tensorrt_llm model (no hidden states): target-only setups, lookahead ones
    included (their cycles carry greedy_child); the BLS refuses the others when it starts."""
    F = feature_dim("DT-DT1-DT2-LS", 16, 32)
    check_route_judge("triton-context", JudgeHead(np.ones(F), np.zeros(F), np.ones(F), 0.0, "DT-DT1-DT2-LS", 16, 32))
    F = feature_dim("DD-DT-DT1-DT2-DD1-LS", 16, 32)
    shipped = JudgeHead(np.ones(F), np.zeros(F), np.ones(F), 0.0, "DD-DT-DT1-DT2-DD1-LS", 16, 32)
    with pytest.raises(ValueError, match="does not run on the context route's Triton repository: .* returns no hidden "
                                         "states. The context route's Triton repository runs target-only setups"):
        check_route_judge("triton-context", shipped)
    cycle = pack_cycle([[4]], chain_tree(2), np.array([[1, 2]]), np.array([2]), np.array([0.5]),
                       np.zeros((1, 3, 16)))
    with pytest.raises(ValueError, match="runs target-only setups"):
        cycle_to_tensors(cycle)
    bls = (REPO / "trtllm_autojudge" / "trt" / "triton" / "models" / "autojudge_bls.py").read_text()
    assert 'check_route_judge("triton-context", head)' in bls and "self.lookahead = head.lookahead > 0" in bls


# ---------------------------------------------------------------------------------------------
# Stock route: the TensorRT-LLM backend's own models with the draft-target parameters filled in.

# The placeholders of TensorRT-LLM's triton_backend/all_models/inflight_batcher_llm templates, as read
# (docs/deploy.md, "Checked against the sources"): names only, by where each sits. Outside quotes:
# the ModelConfig field it fills; "string": inside a quoted parameter value.
TEMPLATE_PLACEHOLDERS = {
    "tensorrt_llm": {  # v1.2.0rc8 (0c8de69)
        "triton_max_batch_size": "max_batch_size", "decoupled_mode": "decoupled", "triton_backend": "backend",
        "max_queue_delay_microseconds": "queue_delay", "max_queue_size": "queue_size",
        "encoder_input_features_data_type": "input_type", "logits_datatype": "output_type",
        "prompt_embedding_table_data_type": "input_type",
        **{name: "string" for name in (
            "max_beam_width", "batching_strategy", "engine_dir", "encoder_engine_dir", "max_tokens_in_paged_kv_cache",
            "max_attention_window_size", "sink_token_length", "batch_scheduler_policy",
            "kv_cache_free_gpu_mem_fraction", "cross_kv_cache_fraction", "kv_cache_host_memory_bytes",
            "kv_cache_onboard_blocks", "enable_trt_overlap", "exclude_input_in_output", "cancellation_check_period_ms",
            "stats_check_period_ms", "iter_stats_max_iterations", "request_stats_max_iterations",
            "enable_kv_cache_reuse", "normalize_log_probs", "enable_chunked_context", "gpu_device_ids",
            "participant_ids", "num_nodes", "lora_cache_optimal_adapter_size", "lora_cache_max_adapter_size",
            "lora_cache_gpu_memory_fraction", "lora_cache_host_memory_bytes", "lora_prefetch_dir", "decoding_mode",
            "lookahead_window_size", "lookahead_ngram_size", "lookahead_verification_set_size", "medusa_choices",
            "eagle_choices", "gpu_weights_percent", "enable_context_fmha_fp32_acc", "multi_block_mode",
            "cuda_graph_mode", "cuda_graph_cache_size", "speculative_decoding_fast_logits", "tokenizer_dir",
            "guided_decoding_backend", "xgrammar_tokenizer_info_path")},
    },
    "preprocessing": {  # 08dc37e (808059d: without hf_model_path)
        "triton_max_batch_size": "max_batch_size", "max_queue_delay_microseconds": "queue_delay",
        "max_queue_size": "queue_size", "preprocessing_instance_count": "instance_count",
        **{name: "string" for name in ("tokenizer_dir", "add_special_tokens", "multimodal_model_path", "engine_dir",
                                       "max_num_images", "hf_model_path")},
    },
    "postprocessing": {  # 89fd9b7
        "triton_max_batch_size": "max_batch_size", "postprocessing_instance_count": "instance_count",
        "tokenizer_dir": "string", "skip_special_tokens": "string",
    },
    "tensorrt_llm_bls": {  # bff88ea (0193dbd: prompt_embedding_table's type fixed, no placeholder)
        "triton_max_batch_size": "max_batch_size", "decoupled_mode": "decoupled", "logits_datatype": "output_type",
        "prompt_embedding_table_data_type": "input_type", "bls_instance_count": "instance_count",
        **{name: "string" for name in ("accumulate_tokens", "tensorrt_llm_model_name",
                                       "tensorrt_llm_draft_model_name", "multimodal_encoders_name")},
    },
}
PYTHON_MODELS = ("preprocessing", "postprocessing", "tensorrt_llm_bls")
DRAFT_TEMPLATE = {"tensorrt_llm_draft": "tensorrt_llm"}  # the draft model is a renamed copy


def tensor_text(name: str, kind: str, optional: bool = True) -> str:
    return (f'  {{\n    name: "{name}"\n    data_type: {kind}\n    dims: [ -1 ]\n'
            + ("    optional: true\n" if optional else "") + "  }")


def template_text(model: str, placeholders: dict[str, str]) -> str:
    """A config template with exactly these placeholders, each where the real one sits."""
    by_role = {}
    for name, role in placeholders.items():
        by_role.setdefault(role, []).append(f"${{{name}}}")
    one = lambda role: by_role[role][0] if role in by_role else None  # noqa: E731
    lines = [f'name: "{model}"', f'backend: "{one("backend") or "python"}"', f"max_batch_size: {one('max_batch_size')}"]
    if "decoupled" in by_role:
        lines.append(f"model_transaction_policy {{\n  decoupled: {one('decoupled')}\n}}")
    if "queue_delay" in by_role or "queue_size" in by_role:
        lines.append(f"dynamic_batching {{\n  max_queue_delay_microseconds: {one('queue_delay')}\n"
                     f"  default_queue_policy: {{ max_queue_size: {one('queue_size')} }}\n}}")
    inputs = [tensor_text("input_ids", "TYPE_INT32")] + [tensor_text(f"typed_input_{i}", t) for i, t in
                                                          enumerate(by_role.get("input_type", []))]
    lines.append("input [\n" + ",\n".join(inputs) + "\n]")
    if "output_type" in by_role:
        lines.append("output [\n" + tensor_text("generation_logits", one("output_type"), optional=False) + "\n]")
    if "instance_count" in by_role:
        lines.append(f"instance_group [\n  {{\n    count: {one('instance_count')}\n    kind: KIND_CPU\n  }}\n]")
    lines += [f'parameters: {{\n  key: "{name}"\n  value: {{\n    string_value: "${{{name}}}"\n  }}\n}}'
              for name, role in placeholders.items() if role == "string"]
    return "\n".join(lines) + "\n"


def release_templates(root: Path, placeholders: dict | None = None) -> Path:
    """A TensorRT-LLM checkout's triton_backend/all_models/inflight_batcher_llm with templates built
    from ``placeholders`` (default: the 1.2 sets above), and the Python models' model.py files."""
    models = root / TEMPLATES_SUBDIR
    for model, names in (placeholders or TEMPLATE_PLACEHOLDERS).items():
        (models / model / "1").mkdir(parents=True)
        (models / model / "config.pbtxt").write_text(template_text(model, names))
        if model in PYTHON_MODELS:
            (models / model / "1" / "model.py").write_text(f"# {model}: TensorRT-LLM's model\n")
    return root


def test_the_fixture_templates_hold_exactly_the_listed_placeholders(tmp_path):
    release_templates(tmp_path)
    for model, names in TEMPLATE_PLACEHOLDERS.items():
        text = (tmp_path / TEMPLATES_SUBDIR / model / "config.pbtxt").read_text()
        assert set(re.findall(r"\$\{(\w+)\}", text)) == set(names)


def test_stock_repository_fills_the_12_templates(tmp_path):
    """The placeholders of the 1.2 templates: every one outside quotes gets a value (the old filler
    left max_queue_size and prompt_embedding_table_data_type there), and every value given is one of
    the template's placeholders, as fill_template.py asserts."""
    pb2 = model_config_pb2()
    checkout = release_templates(tmp_path / "TensorRT-LLM")
    main = runpy.run_path(str(REPO / "build_scripts" / "make_triton_repo.py"))["main"]
    assert main(["--route", "stock", "--output_dir", str(tmp_path / "repo"), "--backend_models_dir", str(checkout),
                 "--draft_engine_dir", str(tmp_path / "e/draft"), "--target_engine_dir", str(tmp_path / "e/target"),
                 "--tokenizer_dir", str(tmp_path / "hf"), "--max_batch_size", "4", "--target_gpus", "0,1"]) == 0
    texts = {p.parent.name: p.read_text() for p in (tmp_path / "repo").glob("*/config.pbtxt")}
    parsed = {name: parse(pb2, text) for name, text in texts.items()}  # a placeholder outside quotes fails here
    assert sorted(parsed) == sorted(STOCK_MODELS)
    for name, cfg in parsed.items():
        assert cfg.name == name and cfg.max_batch_size == 4
    target, draft, bls = parsed["tensorrt_llm"], parsed["tensorrt_llm_draft"], parsed["tensorrt_llm_bls"]
    assert target.backend == draft.backend == "tensorrtllm" and not target.model_transaction_policy.decoupled
    assert target.dynamic_batching.default_queue_policy.max_queue_size == 0  # fill_template.py's default
    assert parsed["preprocessing"].dynamic_batching.max_queue_delay_microseconds == 0
    assert target.parameters["engine_dir"].string_value == str(tmp_path / "e/target")
    assert draft.parameters["engine_dir"].string_value == str(tmp_path / "e/draft")
    for engine in (target, draft):
        assert engine.parameters["enable_kv_cache_reuse"].string_value == "true"  # the draft-target target needs it
        assert engine.output[0].data_type == pb2.TYPE_FP32
        assert [i.data_type for i in engine.input[1:]] == [pb2.TYPE_FP16, pb2.TYPE_FP16]
        assert engine.parameters["lora_cache_max_adapter_size"].string_value == "${lora_cache_max_adapter_size}"
    assert target.parameters["gpu_device_ids"].string_value == "0,1"
    assert draft.parameters["gpu_device_ids"].string_value == "${gpu_device_ids}"  # unset: the backend's default
    assert bls.parameters["tensorrt_llm_model_name"].string_value == "tensorrt_llm"
    assert bls.parameters["tensorrt_llm_draft_model_name"].string_value == "tensorrt_llm_draft"  # the BLS's DTM loop
    assert bls.instance_group[0].count == 4
    assert (tmp_path / "repo/tensorrt_llm_bls/1/model.py").read_text().startswith("# tensorrt_llm_bls")  # copied
    values = stock_parameters(target_engine_dir="t", draft_engine_dir="d", tokenizer_dir="k", target_gpus="0")
    for model, given in values.items():  # fill_template.py: assert key in the template
        assert set(given) <= set(TEMPLATE_PLACEHOLDERS[DRAFT_TEMPLATE.get(model, model)]), model


def test_a_bls_template_without_the_embedding_type_placeholder_fills_too(tmp_path):
    older = dict(TEMPLATE_PLACEHOLDERS)
    older["tensorrt_llm_bls"] = {k: v for k, v in older["tensorrt_llm_bls"].items()
                                 if k != "prompt_embedding_table_data_type"}  # the 0193dbd template
    make_stock_repository(tmp_path / "repo", release_templates(tmp_path / "trtllm", older),
                          draft_engine_dir="d", target_engine_dir="t", tokenizer_dir="k")
    assert "${" not in (tmp_path / "repo/tensorrt_llm_bls/config.pbtxt").read_text().split("parameters")[0]


def test_stock_repository_refuses_templates_it_cannot_fill(tmp_path):
    kwargs = dict(draft_engine_dir="d", target_engine_dir="t", tokenizer_dir="k")
    newer = {**TEMPLATE_PLACEHOLDERS, "preprocessing": {**TEMPLATE_PLACEHOLDERS["preprocessing"],
                                                        "new_knob": "instance_count"}}
    newer["preprocessing"].pop("preprocessing_instance_count")
    with pytest.raises(ValueError, match=r"has no placeholder \['preprocessing_instance_count'\]"):
        make_stock_repository(tmp_path / "repo", release_templates(tmp_path / "a", newer), **kwargs)
    renamed = {**TEMPLATE_PLACEHOLDERS, "tensorrt_llm": {("gpt_model_path" if k == "engine_dir" else k): v
                                                          for k, v in TEMPLATE_PLACEHOLDERS["tensorrt_llm"].items()}}
    with pytest.raises(ValueError, match=r"tensorrt_llm/config.pbtxt has no placeholder \['engine_dir'\]"):
        make_stock_repository(tmp_path / "repo", release_templates(tmp_path / "b", renamed), **kwargs)
    text = template_text("postprocessing", TEMPLATE_PLACEHOLDERS["postprocessing"]).replace(
        "${postprocessing_instance_count}", "${new_count}")
    with pytest.raises(ValueError, match=r"no value for \['new_count'\]"):  # an unknown one outside quotes
        fill_template(text, {"tokenizer_dir": "k", "triton_max_batch_size": "4"}, "postprocessing")
    main = runpy.run_path(str(REPO / "build_scripts" / "make_triton_repo.py"))["main"]
    with pytest.raises(SystemExit):
        main(["--route", "stock", "--output_dir", "o", "--draft_engine_dir", "d", "--target_engine_dir", "t",
              "--tokenizer_dir", "k"])  # no --backend_models_dir


def test_the_templates_are_looked_for_in_tensorrt_llm(tmp_path):
    """They left tensorrtllm_backend in 2025: a checkout of it (all_models/inflight_batcher_llm) gets
    an error naming where they live; a TensorRT-LLM checkout or its template folder works."""
    assert TEMPLATES_SUBDIR == "triton_backend/all_models/inflight_batcher_llm"
    checkout = release_templates(tmp_path / "TensorRT-LLM")
    assert template_dir(checkout) == template_dir(checkout / TEMPLATES_SUBDIR) == checkout / TEMPLATES_SUBDIR
    backend_repo = tmp_path / "tensorrtllm_backend"
    (backend_repo / "all_models" / "inflight_batcher_llm").mkdir(parents=True)  # what is left of it after 2025
    kwargs = dict(draft_engine_dir="d", target_engine_dir="t", tokenizer_dir="k")
    for wrong in (backend_repo, backend_repo / "all_models" / "inflight_batcher_llm"):
        with pytest.raises(FileNotFoundError, match=f"TensorRT-LLM checkout .*{TEMPLATES_SUBDIR}"):
            make_stock_repository(tmp_path / "repo", wrong, **kwargs)
    serve = (REPO / "examples" / "triton" / "serve_stock.sh").read_text()
    assert '--backend_models_dir "$TRTLLM/triton_backend/all_models/inflight_batcher_llm"' in serve


def test_the_bls_refuses_a_draft_width_its_draft_cannot_serve(tmp_path):
    """The tensorrtllm backend never sets ExecutorConfig.gather_generation_logits: draft_width > 1
    needs a draft built with --gather_generation_logits, and the BLS is given the draft's folder."""
    configs = repository_configs(draft_engine_dir="/e/draft", target_engine_dir="/e/target", tokenizer_dir="/hf")
    bls_params = {p["key"]: p["value"]["string_value"] for p in configs["autojudge_bls"]["parameters"]}
    assert bls_params["draft_engine_dir"] == "/e/draft"
    built = {"build_config": {"gather_generation_logits": True}}
    check_draft_width(3, built)
    check_draft_width(1, {"build_config": {}})
    with pytest.raises(ValueError, match="--gather_generation_logits: rebuild the draft with build-engines --width 2"):
        check_draft_width(2, {"build_config": {"gather_generation_logits": False}})
    bls = (REPO / "trtllm_autojudge" / "trt" / "triton" / "models" / "autojudge_bls.py").read_text()
    assert "check_draft_width(settings.width, self.draft_engine_config)" in bls


def test_a_route_refuses_a_depth_below_the_judges_minimum_run():
    """A minimum run of M judges only a mismatch that opens M tokens: a chain of fewer draft tokens has
    none, so the build is refused with the depth to give; M draft tokens leave the first node."""
    F = feature_dim("DT", 16, 32)
    head = JudgeHead(np.ones(F), np.zeros(F), np.ones(F), 0.0, "DT", 16, 32, meta={"min_run": 8})
    check_route_judge("stock", head, depth=8)
    with pytest.raises(ValueError, match="--depth 7 gives no draft node a verdict: the judge's minimum run is 8 .* "
                                         "build with --depth 8 or more"):
        check_route_judge("stock", head, depth=7)

"""make-triton-repo --route eagle: the TensorRT-LLM backend's models serving an EAGLE-route engine, with
its tree as the backend parses ``eagle_choices`` and only the builds the backend can serve."""
import json
import re
import runpy
from pathlib import Path

import pytest

from test_deploy_eagle_route import CHOICES, judge_file
from test_deploy_triton import TEMPLATE_PLACEHOLDERS, model_config_pb2, parse, release_templates
from trtllm_autojudge.decoding.dynamic_tree import DynamicTree
from trtllm_autojudge.decoding.tree import DraftTree
from trtllm_autojudge.trt.engine.eagle_spec import EAGLE_BLOCK_KEY, eagle_block
from trtllm_autojudge.trt.triton.eagle import EAGLE_MODELS, eagle_choices_parameter, make_eagle_repository

REPO = Path(__file__).resolve().parents[1]


def csv_str_to_vec_vec_int(text: str) -> list[list[int]]:
    """The tensorrtllm backend's ``utils::csvStrToVecVecInt`` (triton_backend/inflight_batcher_llm/src/
    utils.cc), step for step: read up to each ``}``, drop a leading ``{``, split the rest at commas
    (std::stoi each), then skip whitespace, everything up to the next comma, and whitespace."""
    out, pos = [], 0
    while True:
        end = text.find("}", pos)
        if end < 0:  # getline reads to the end: eof set, the loop stops
            break
        chunk = text[pos:end]
        if not chunk:
            break
        if chunk[0] == "{":
            chunk = chunk[1:]
        row = [int(part) for part in (p.strip() for p in chunk.split(",")) if part]
        assert row, "csvStrToVecInt: empty vector"
        out.append(row)
        pos = end + 1
        while pos < len(text) and text[pos].isspace():
            pos += 1
        comma = text.find(",", pos)
        pos = len(text) if comma < 0 else comma + 1
        while pos < len(text) and text[pos].isspace():
            pos += 1
    assert out, "csvStrToVecVecInt: empty vector of vector"
    return out


def engine_dir(tmp_path, tree, threshold_source="engine", name="engine"):
    block = eagle_block(judge_file(tmp_path), tmp_path / "libautojudge_trt_plugin.so", tree,
                        threshold_source=threshold_source)
    folder = tmp_path / name
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({"pretrained_config": {EAGLE_BLOCK_KEY: block.to_json()}}))
    return folder


def test_eagle_choices_parse_back_as_the_backend_reads_them():
    for choices in (CHOICES, [[0]], [[3], [3, 10], [3, 10, 0]], DraftTree.from_choices(CHOICES).choices()):
        text = eagle_choices_parameter(choices)
        assert csv_str_to_vec_vec_int(text) == [list(c) for c in choices]
    assert eagle_choices_parameter([[0], [0, 1]]) == "{0}, {0, 1}"


def test_eagle_repository_fills_the_templates(tmp_path):
    pb2 = model_config_pb2()
    checkout = release_templates(tmp_path / "TensorRT-LLM")
    engine = engine_dir(tmp_path, DraftTree.from_choices(CHOICES))
    main = runpy.run_path(str(REPO / "build_scripts" / "make_triton_repo.py"))["main"]
    assert main(["--route", "eagle", "--output_dir", str(tmp_path / "repo"), "--backend_models_dir", str(checkout),
                 "--target_engine_dir", str(engine), "--tokenizer_dir", str(tmp_path / "hf"), "--max_batch_size", "4",
                 "--target_gpus", "0,1"]) == 0
    texts = {p.parent.name: p.read_text() for p in (tmp_path / "repo").glob("*/config.pbtxt")}
    parsed = {name: parse(pb2, text) for name, text in texts.items()}
    assert sorted(parsed) == sorted(EAGLE_MODELS)
    target, bls = parsed["tensorrt_llm"], parsed["tensorrt_llm_bls"]
    assert target.backend == "tensorrtllm" and target.max_batch_size == 4
    assert target.parameters["decoding_mode"].string_value == "eagle"
    assert csv_str_to_vec_vec_int(target.parameters["eagle_choices"].string_value) == CHOICES
    assert target.parameters["engine_dir"].string_value == str(engine)
    assert target.parameters["gpu_device_ids"].string_value == "0,1"
    assert target.parameters["enable_kv_cache_reuse"].string_value == "${enable_kv_cache_reuse}"  # unset
    # the BLS's get_valid_param_value reads an unfilled "${...}" as unset: no draft-target loop
    assert bls.parameters["tensorrt_llm_draft_model_name"].string_value == "${tensorrt_llm_draft_model_name}"
    assert bls.parameters["tensorrt_llm_model_name"].string_value == "tensorrt_llm"
    unfilled = re.findall(r"\$\{(\w+)\}", texts["tensorrt_llm"])
    assert "eagle_choices" not in unfilled and "decoding_mode" not in unfilled
    assert {"decoding_mode", "eagle_choices"} <= set(TEMPLATE_PLACEHOLDERS["tensorrt_llm"])  # the 0c8de69 template


def test_eagle_repository_refuses_builds_the_backend_cannot_serve(tmp_path):
    checkout = release_templates(tmp_path / "TensorRT-LLM")
    kwargs = dict(tokenizer_dir="k")
    dynamic = engine_dir(tmp_path, DynamicTree(3, 2, 6), name="dynamic")
    with pytest.raises(ValueError, match=r"rebuild it with a static tree \(--eagle_choices\)"):
        make_eagle_repository(tmp_path / "repo", checkout, target_engine_dir=str(dynamic), **kwargs)
    per_request = engine_dir(tmp_path, DraftTree.from_choices(CHOICES), threshold_source="request", name="request")
    with pytest.raises(ValueError, match="--threshold_source engine: the backend sets no per-request EagleConfig"):
        make_eagle_repository(tmp_path / "repo", checkout, target_engine_dir=str(per_request), **kwargs)
    stock = tmp_path / "stock"
    stock.mkdir()
    (stock / "config.json").write_text(json.dumps({"pretrained_config": {}}))
    with pytest.raises(ValueError, match="build it with `build-engines --route eagle`"):
        make_eagle_repository(tmp_path / "repo", checkout, target_engine_dir=str(stock), **kwargs)
    with pytest.raises(FileNotFoundError, match="reads the engine's config.json"):
        make_eagle_repository(tmp_path / "repo", checkout, target_engine_dir=str(tmp_path / "absent"), **kwargs)
    assert not (tmp_path / "repo").exists()  # refused before anything was written
    main = runpy.run_path(str(REPO / "build_scripts" / "make_triton_repo.py"))["main"]
    base = ["--route", "eagle", "--output_dir", "o", "--target_engine_dir", "t", "--tokenizer_dir", "k"]
    for extra in ([], ["--backend_models_dir", "b", "--draft_engine_dir", "d"]):
        with pytest.raises(SystemExit):
            main(base + extra)

"""The CPU route's repository: its configs parse against Triton's ModelConfig, and a real server
pointed at a missing checkpoint and a missing judge file reports those models as failed, naming
the paths, while the others load."""
from __future__ import annotations

import json
import shutil

from test_deploy_triton import model_config_pb2, parse
from trtllm_autojudge.serving.server import Ports, TritonServer, free_port
from trtllm_autojudge.trt.triton.cpu import CPU_MODELS, make_cpu_repository
from trtllm_autojudge.trt.triton.tensors import ACCEPTANCE_TENSORS, CYCLE_TENSORS


def test_the_cpu_repository_parses_and_speaks_the_engine_routes_names(tiny_checkpoints, tmp_path):
    pb2 = model_config_pb2()
    written = make_cpu_repository(tmp_path / "repo", tiny_checkpoints.pair(), str(tiny_checkpoints.judge),
                                  max_draft_tokens=5, max_draft_width=2, bls_instances=3)
    parsed = {p.parent.name: parse(pb2, p.read_text()) for p in written}
    assert sorted(parsed) == sorted(CPU_MODELS)
    draft, target, bls = parsed["tensorrt_llm_draft"], parsed["autojudge_target"], parsed["autojudge_bls"]
    assert draft.backend == target.backend == "python" and draft.max_batch_size == 3
    assert {i.name for i in draft.input} >= {"input_ids", "input_lengths", "request_output_len", "end_id",
                                             "return_generation_logits", "stop"}
    assert {o.name for o in draft.output} == {"output_ids", "sequence_length", "generation_logits"}
    assert {i.name for i in target.input} == set(CYCLE_TENSORS) | {"stop"}
    assert {o.name for o in target.output} == set(ACCEPTANCE_TENSORS)
    assert target.instance_group[0].kind == pb2.ModelInstanceGroup.KIND_CPU and target.instance_group[0].count == 1
    assert bls.model_transaction_policy.decoupled and bls.instance_group[0].count == 3
    assert bls.parameters["keyed_caches"].string_value == "true"
    assert parsed["preprocessing"].parameters["task"].string_value == "gsm8k-program"
    block = json.loads((tmp_path / "repo" / "autojudge_target" / "1" / "config.json").read_text())
    limits = block["pretrained_config"]["autojudge"]
    assert (limits["max_path_len"], limits["max_draft_nodes"], limits["max_paths"]) == (6, 10, 6)
    assert limits["judge_file"] == str(tiny_checkpoints.judge.resolve())


def test_a_missing_checkpoint_and_judge_fail_their_models_by_path(triton, tiny_checkpoints, tmp_path):
    """The target's weights and the judge file are gone once the repository is written: the target
    stand-in and the BLS fail to load with the paths in their reasons; the draft, preprocessing and
    postprocessing serve."""
    target = tmp_path / "target"
    shutil.copytree(tiny_checkpoints.target, target)
    judge = tmp_path / "judge.safetensors"
    shutil.copy(tiny_checkpoints.judge, judge)
    make_cpu_repository(tmp_path / "repo", tiny_checkpoints.pair(target=str(target)), str(judge), max_draft_tokens=4,
                        bls_instances=1)
    (target / "model.safetensors").unlink()
    judge.unlink()
    server = TritonServer(triton, tmp_path / "repo", tmp_path, Ports(free_port(), free_port(), free_port()))
    with server:
        server.wait_ready(["preprocessing", "postprocessing", "tensorrt_llm_draft"], timeout=170)
        index = server.repository_index()
    assert index["autojudge_target"]["state"] == "UNAVAILABLE" and str(target) in index["autojudge_target"]["reason"]
    assert index["autojudge_bls"]["state"] == "UNAVAILABLE" and str(judge) in index["autojudge_bls"]["reason"]
    assert server.process.returncode == 0

"""AutoJudgeAccept plugin: fields from a judge file, network-insertion arguments, library loading."""
import ctypes
import shutil
import subprocess

import numpy as np
import pytest

from trtllm_autojudge.judge.head import JudgeHead, feature_dim
from trtllm_autojudge.spec.judge_blocks import block_codes
from trtllm_autojudge.trt.engine import stock_spec
from trtllm_autojudge.trt.plugin import contract, library
from trtllm_autojudge.trt.plugin.contract import (FIELD_DTYPES, LOGITS_INPUTS, accept_input_names,
                                                  check_accept_input_shapes, check_plugin_fields, plugin_field_specs,
                                                  plugin_io_names)
from trtllm_autojudge.trt.plugin.fields import engine_plugin_fields

HD, HT = 24, 40


def random_head(setup, seed=0, threshold=0.35):
    rng = np.random.default_rng(seed)
    F = feature_dim(setup, HD, HT)
    return JudgeHead(rng.normal(size=F), rng.normal(size=F), rng.uniform(0.5, 2.0, size=F), float(rng.normal()),
                     setup, HD, HT, threshold=threshold, meta={"draft_model": "d", "target_model": "t"})


@pytest.mark.parametrize("setup,feature_blocks,draft_hidden", [("DT", [0], 0), ("DD-DT", [1, 0], HD),
                                                                ("DD-DT-DT1-DT2-DD1-LS", [1, 0, 2, 3, 4, 5], HD),
                                                                ("DT-DT1-DT2-LS", [0, 2, 3, 5], 0)])
def test_fields_from_a_saved_judge_file(tmp_path, setup, feature_blocks, draft_hidden):
    head = random_head(setup)
    path = tmp_path / "judge.safetensors"
    head.save(path)
    fields = engine_plugin_fields(path, max_path_len=9, output_mode="accept", target_hidden=HT, draft_hidden=HD)
    assert list(fields) == list(FIELD_DTYPES)
    w, c = head.folded()
    np.testing.assert_array_equal(fields["judge_weight"], w)
    np.testing.assert_allclose(fields["judge_bias"], [c], rtol=1e-6)
    assert fields["judge_weight"].dtype == np.float32 and fields["judge_weight"].shape == (feature_dim(setup, HD, HT),)
    assert fields["feature_blocks"].tolist() == feature_blocks and fields["draft_hidden"].tolist() == [draft_hidden]
    assert fields["target_hidden"].tolist() == [HT] and fields["max_path_len"].tolist() == [9]
    assert fields["output_mode"].tolist() == [0] and fields["threshold"].tolist() == [np.float32(0.35)]
    # the folded fields score features exactly as the judge head does
    x = np.random.default_rng(1).normal(size=(5, w.size)).astype(np.float32)
    np.testing.assert_allclose(x.astype(np.float64) @ fields["judge_weight"] + fields["judge_bias"][0], head.logits(x),
                               rtol=1e-5, atol=1e-5)
    assert engine_plugin_fields(path, 9, "logits", threshold=0.8)["threshold"].tolist() == [np.float32(0.8)]


def test_fields_refuse_a_judge_for_other_models(tmp_path):
    head = random_head("DD-DT")
    with pytest.raises(ValueError, match="target hidden size 64 != judge's 40"):
        engine_plugin_fields(head, 9, target_hidden=64, draft_hidden=HD)
    with pytest.raises(ValueError, match="draft hidden size 8 != judge's 24"):
        engine_plugin_fields(head, 9, target_hidden=HT, draft_hidden=8)
    # a DT judge reads no draft hidden state: any draft size is fine
    engine_plugin_fields(random_head("DT"), 9, target_hidden=HT, draft_hidden=8)
    with pytest.raises(ValueError, match="output_mode"):
        engine_plugin_fields(head, 9, output_mode="softmax")
    with pytest.raises(ValueError, match="max_path_len"):
        engine_plugin_fields(head, 1)


def test_field_checks_name_the_field():
    good = engine_plugin_fields(random_head("DT"), 5)
    assert [(n, t) for n, _, t in plugin_field_specs(good)] == [
        ("judge_weight", "FLOAT32"), ("judge_bias", "FLOAT32"), ("feature_blocks", "INT32"), ("target_hidden", "INT32"),
        ("draft_hidden", "INT32"), ("max_path_len", "INT32"), ("output_mode", "INT32"), ("threshold", "FLOAT32"),
        ("min_run", "INT32")]
    for change, message in [({"judge_weight": np.ones(3)}, "judge_weight has 3 features"),
                            ({"draft_hidden": np.array([7])}, "do not fit feature_blocks DT"),
                            ({"threshold": np.array([1.5])}, "threshold"),
                            ({"feature_blocks": np.array([0, 9])}, "distinct codes"),
                            ({"feature_blocks": np.array([0, 0])}, "distinct codes"),
                            ({"feature_blocks": np.array([0, 5])}, "judge_weight has 40 features, feature_blocks DT-LS"),
                            ({"max_path_len": np.array([2.5])}, "integers"),
                            ({"judge_bias": np.array([np.nan])}, "finite"),
                            ({"target_hidden": np.array([40, 40])}, "one value"),
                            ({"min_run": np.array([0])}, "min_run 0 must be >= 1")]:
        with pytest.raises(ValueError, match=message):
            check_plugin_fields({**good, **change})
    with pytest.raises(ValueError, match="missing"):
        check_plugin_fields({k: v for k, v in good.items() if k != "output_mode"})


def test_field_sets_of_the_first_contract_are_migrated():
    """feature_setup 0 / 1 (the first contract) become feature_blocks DT / DD-DT; a field set without
    min_run gets 1 (no minimum run), as the plugin does."""
    for setup, feature_setup in (("DT", 0), ("DD-DT", 1)):
        fields = engine_plugin_fields(random_head(setup), 5)
        old = {k: v for k, v in fields.items() if k != "feature_blocks"} | {"feature_setup": np.array([feature_setup])}
        migrated = check_plugin_fields(old)
        assert list(migrated) == list(FIELD_DTYPES)
        assert migrated["feature_blocks"].tolist() == block_codes(setup).tolist()
    without = check_plugin_fields({k: v for k, v in fields.items() if k != "min_run"})  # exported before min_run
    assert without["min_run"].tolist() == [1] and list(without) == list(FIELD_DTYPES)
    with pytest.raises(ValueError, match="feature_setup 2 is not one of"):
        check_plugin_fields({k: v for k, v in fields.items() if k != "feature_blocks"} | {"feature_setup": [2]})


def test_a_target_only_lookahead_judge_takes_the_stock_inputs(tmp_path):
    head = random_head("DT-DT1-DT2-LS")
    head.save(tmp_path / "judge.safetensors")
    block = stock_spec.stock_block(tmp_path / "judge.safetensors", "lib.so", max_draft_len=6)
    fields = stock_spec.stock_plugin_fields(block, target_hidden=HT)
    assert fields["feature_blocks"].tolist() == [0, 2, 3, 5] and fields["draft_hidden"].tolist() == [0]
    assert plugin_io_names(fields) == (LOGITS_INPUTS[:-1], ("rewritten_logits",))


def test_insertion_arguments_are_checked_before_tensorrt():
    dt = engine_plugin_fields(random_head("DT"), 5)  # D+1 = 5
    ddt = engine_plugin_fields(random_head("DD-DT"), 5)
    assert accept_input_names([0]) == ("target_logits", "target_hidden", "draft_tokens", "draft_lens", "paths",
                                       "threshold")
    assert accept_input_names([1, 0])[-1] == "draft_hidden"
    assert accept_input_names(block_codes("DT-LS"))[6:] == ("greedy_child",)
    assert accept_input_names(block_codes("DD-DT-DT1-DT2-DD1-LS"))[6:] == ("draft_hidden", "greedy_child")
    B, N, P, V = 3, 6, 2, 100
    shapes = {"target_logits": (B * (N + 1), V), "target_hidden": (B * (N + 1), HT), "draft_tokens": (B, N),
              "draft_lens": (B,), "paths": (B, P, 5), "threshold": (B,)}
    check_accept_input_shapes(shapes, dt)
    check_accept_input_shapes({k: tuple(-1 if i == 0 else d for i, d in enumerate(s)) for k, s in shapes.items()}, dt)
    check_accept_input_shapes({**shapes, "draft_hidden": (B * (N + 1), HD)}, ddt)
    for bad, message in [({"target_logits": (B * N, V)}, "B\\*\\(N\\+1\\)"), ({"target_hidden": (21, 41)}, "target_hidden width"),
                         ({"paths": (B, P, 4)}, "max_path_len"), ({"threshold": (B + 1,)}, "threshold must be"),
                         ({"draft_lens": (B, 1)}, "rank 1")]:
        with pytest.raises(ValueError, match=message):
            check_accept_input_shapes({**shapes, **bad}, dt)
    with pytest.raises(ValueError, match="inputs must be"):
        check_accept_input_shapes(shapes, ddt)  # DD-DT needs draft_hidden
    lookahead = engine_plugin_fields(random_head("DT-LS"), 5)
    check_accept_input_shapes({**shapes, "greedy_child": (B, N + 1)}, lookahead)
    with pytest.raises(ValueError, match=r"greedy_child must be \[B, N\+1\], one entry per node"):
        check_accept_input_shapes({**shapes, "greedy_child": (B, N)}, lookahead)
    with pytest.raises(ValueError, match="inputs must be"):
        check_accept_input_shapes(shapes, lookahead)  # a lookahead judge needs greedy_child


INIT_SOURCE = r"""
#include <stdbool.h>
#include <string.h>
static char g_ns[64];
static void* g_logger = (void*)1;
bool initAutoJudgePlugins(void* logger, char const* ns) {
    g_logger = logger; strncpy(g_ns, ns, sizeof(g_ns) - 1); return strcmp(ns, "autojudge") == 0;
}
char const* seen_namespace(void) { return g_ns; }
int seen_null_logger(void) { return g_logger == 0; }
"""


def compile_library(tmp_path, source, name):
    if shutil.which("gcc") is None:
        pytest.skip("gcc is not installed: the loader test builds a small C library")
    src, lib = tmp_path / f"{name}.c", tmp_path / f"{name}.so"
    src.write_text(source)
    subprocess.run(["gcc", "-shared", "-fPIC", "-o", str(lib), str(src)], check=True)
    return lib


def test_loader_calls_the_init_function_with_the_namespace(tmp_path, monkeypatch):
    lib = compile_library(tmp_path, INIT_SOURCE, "libinit_ok")
    monkeypatch.setattr(library, "_loaded", {})
    monkeypatch.setenv(library.ENV_VAR, str(lib))
    handle = library.load_plugin_library()
    handle.seen_namespace.restype = ctypes.c_char_p
    assert handle.seen_namespace() == contract.PLUGIN_NAMESPACE.encode()
    assert handle.seen_null_logger() == 1  # TensorRT-LLM's own loader passes a null logger too
    assert library.load_plugin_library(lib) is handle  # loaded once per process


def test_loader_errors_say_what_to_do(tmp_path, monkeypatch):
    monkeypatch.setattr(library, "_loaded", {})
    monkeypatch.delenv(library.ENV_VAR, raising=False)
    with pytest.raises(FileNotFoundError, match="AUTOJUDGE_PLUGIN_LIB"):
        library.load_plugin_library()
    with pytest.raises(FileNotFoundError, match="build-plugin"):
        library.load_plugin_library(tmp_path / "missing.so")
    no_init = compile_library(tmp_path, "int unrelated(void) { return 0; }\n", "libno_init")
    with pytest.raises(ImportError, match="does not export initAutoJudgePlugins"):
        library.load_plugin_library(no_init)
    refuses = compile_library(tmp_path, "#include <stdbool.h>\nbool initAutoJudgePlugins(void* l, char const* n)"
                                        " { return false; }\n", "libinit_false")
    with pytest.raises(RuntimeError, match="returned false"):
        library.load_plugin_library(refuses)


def test_tree_logits_mode_contract():
    """output_mode tree_logits: the EAGLE step's six inputs (greedy_child for a lookahead judge), one output,
    ragged rows (L free), target-only judges."""
    dt = engine_plugin_fields(random_head("DT"), 5, "tree_logits", target_hidden=HT)
    assert plugin_io_names(dt) == (contract.TREE_LOGITS_INPUTS[:6], ("rewritten_logits",))
    look = engine_plugin_fields(random_head("DT-DT1-DT2-LS"), 5, "tree_logits", target_hidden=HT)
    assert plugin_io_names(look)[0] == contract.TREE_LOGITS_INPUTS
    shapes = {"target_logits": (-1, 32000), "target_hidden": (-1, HT), "draft_tokens": (-1, 9), "draft_lens": (-1,),
              "paths": (-1, 10, 5), "threshold": (-1,)}
    contract.check_plugin_input_shapes(shapes, dt)
    with pytest.raises(ValueError, match="paths last dimension vs field max_path_len"):
        contract.check_plugin_input_shapes({**shapes, "paths": (3, 10, 4)}, dt)
    with pytest.raises(ValueError, match=r"greedy_child must be \[B, N\+1\], one entry per node"):
        contract.check_plugin_input_shapes({**shapes, "draft_tokens": (3, 9), "greedy_child": (3, 9)}, look)
    with pytest.raises(ValueError, match="runs target-only judges"):
        engine_plugin_fields(random_head("DD-DT"), 5, "tree_logits", target_hidden=HT, draft_hidden=HD)

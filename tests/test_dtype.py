"""--dtype: choosing the compute dtype, loading models in it, and artefacts that record theirs."""
from __future__ import annotations

import argparse
import logging

import numpy as np
import pytest
import torch

from tiny_models import tiny_pair
from trtllm_autojudge.dtype_record import check_artifact_dtype
from trtllm_autojudge.judge.dataset import FeatureSet
from trtllm_autojudge.judge.head import JudgeHead
from trtllm_autojudge.models import dtype as dtype_mod
from trtllm_autojudge.models.dtype import CHOICES, dtype_name, resolve_dtype
from trtllm_autojudge.models.loading import add_model_args, load_pair


def test_auto_is_bf16_exactly_where_the_cpu_has_native_bf16(monkeypatch):
    for native, expected in ((True, torch.bfloat16), (False, torch.float32)):
        monkeypatch.setattr(dtype_mod, "cpu_has_native_bf16", lambda native=native: native)
        assert resolve_dtype("auto", "cpu") == expected
    assert resolve_dtype("float32") == torch.float32


def test_cpu_flags_are_read_from_cpuinfo(tmp_path, monkeypatch):
    fake = tmp_path / "cpuinfo"
    for flags, expected in (("fpu avx512f avx512_bf16 sse", True), ("fpu avx2 avx512f", False), ("amx_bf16 x", True)):
        fake.write_text(f"processor : 0\nflags : {flags}\n")
        monkeypatch.setattr(dtype_mod, "Path", lambda _p, fake=fake: fake)
        dtype_mod.cpu_has_native_bf16.cache_clear()
        assert dtype_mod.cpu_has_native_bf16() is expected
    dtype_mod.cpu_has_native_bf16.cache_clear()


def test_unknown_dtype_lists_the_choices():
    with pytest.raises(ValueError, match="float16.*auto, float32, bfloat16"):
        resolve_dtype("float16")


def test_bf16_without_native_support_runs_with_a_warning(monkeypatch, caplog):
    monkeypatch.setattr(dtype_mod, "cpu_has_native_bf16", lambda: False)
    with caplog.at_level(logging.WARNING):
        assert resolve_dtype("bfloat16", "cpu") == torch.bfloat16
    assert "emulated and slower" in caplog.text


def test_artifact_made_in_another_dtype_warns_with_both_names(caplog):
    with caplog.at_level(logging.WARNING):
        assert check_artifact_dtype("the judge", "float32", "float32")
        assert check_artifact_dtype("the judge", None, "float32")  # unrecorded = float32 (older files)
        assert not caplog.text
        assert not check_artifact_dtype("the judge", None, "bfloat16")
    assert "the judge was made in float32 and is used with models in bfloat16" in caplog.text
    assert "run with --dtype float32)" in caplog.text
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        assert not check_artifact_dtype("the draft", "bfloat16", "float32")  # e.g. a CPU without native bf16
    assert "or run with --dtype bfloat16 on hardware that computes bfloat16 natively)" in caplog.text


def _save_tiny(folder, dtype=torch.float32):
    target, _ = tiny_pair(seed=0, dtype=dtype)
    target.model.save_pretrained(folder)
    return target


def _tokenizer_free_args(folder, dtype):
    p = argparse.ArgumentParser()
    add_model_args(p)
    return p.parse_args(["--target", str(folder), "--draft", str(folder), "--dtype", dtype])


@pytest.mark.parametrize("name", ["float32", "bfloat16"])
def test_load_pair_loads_both_models_in_the_dtype(tmp_path, monkeypatch, name):
    _save_tiny(tmp_path)
    import transformers
    monkeypatch.setattr(transformers.AutoTokenizer, "from_pretrained", staticmethod(lambda *a, **k: _NoTokenizer()))
    target, draft, _ = load_pair(_tokenizer_free_args(tmp_path, name))
    assert target.dtype == draft.dtype == getattr(torch, name)
    out = target.session().forward([3, 4, 5])
    assert out.logits.dtype == out.hidden.dtype == torch.float32  # the loop always sees float32


class _NoTokenizer:
    eos_token_id = 2


def test_load_pair_rejects_an_unknown_dtype(tmp_path):
    args = argparse.Namespace(target=str(tmp_path), draft=str(tmp_path), device="cpu", threads=None, dtype="half")
    with pytest.raises(SystemExit, match="unknown dtype 'half'"):
        load_pair(args)


def test_cli_choices_are_the_documented_ones():
    assert CHOICES == ("auto", "float32", "bfloat16")
    assert dtype_name(torch.bfloat16) == "bfloat16"


def test_feature_set_and_judge_record_their_dtype(tmp_path, caplog):
    x = np.random.default_rng(0).normal(size=(8, 4)).astype(np.float16)
    fs = FeatureSet(x, [0, 1] * 4, [0, 0, 1, 1, 2, 2, 3, 3], list(range(8)), "DT", 4, 4, "d", "t", "gsm8k", "bfloat16")
    fs.save(tmp_path / "f.safetensors")
    assert FeatureSet.load(tmp_path / "f.safetensors").dtype == "bfloat16"
    head = JudgeHead(np.ones(4), np.zeros(4), np.ones(4), 0.0, "DT", 4, 4, meta={"dtype": "bfloat16"})
    head.save(tmp_path / "j.safetensors")
    with caplog.at_level(logging.WARNING):
        JudgeHead.load(tmp_path / "j.safetensors", dtype="bfloat16")
        assert not caplog.text
        JudgeHead.load(tmp_path / "j.safetensors", dtype="float32")
    assert "made in bfloat16 and is used with models in float32" in caplog.text

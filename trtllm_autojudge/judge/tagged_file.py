"""Safetensors files that carry a JSON metadata entry: the judge file and the feature-set file."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from safetensors import safe_open
from safetensors.numpy import load_file, save_file


def save_tagged(path: str | Path, tensors: dict[str, np.ndarray], key: str, meta: dict) -> None:
    save_file(tensors, str(path), metadata={key: json.dumps(meta, sort_keys=True)})


def load_tagged(path: str | Path, key: str, kind: str, format_version: int) -> tuple[dict, dict[str, np.ndarray]]:
    """(metadata, tensors) of a ``kind`` file whose metadata entry ``key`` has ``format_version``."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{kind} file {path} does not exist")
    try:
        with safe_open(str(path), "numpy") as f:
            raw = (f.metadata() or {}).get(key)
        tensors = load_file(str(path))
    except Exception as e:  # safetensors raises several types for a damaged file
        raise ValueError(f"{path} is not a readable safetensors {kind} file: {e}") from e
    if raw is None:
        raise ValueError(f"{path} has no {key!r} metadata: it is not a {kind} file")
    meta = json.loads(raw)
    if meta.get("format_version") != format_version:
        raise ValueError(f"{path} has {kind} format {meta.get('format_version')}, this version reads {format_version}")
    return meta, tensors

"""Load the AutoJudgeAccept plugin library so TensorRT's registry holds its creator.

TensorRT-LLM loads its own plugins the same way (``tensorrt_llm/plugin/plugin.py``,
``_load_plugin_lib``): ``ctypes.CDLL(path, RTLD_GLOBAL)``, then the library's
``init...Plugins(void* logger, char const* ns)`` with a null logger. Load the library before
building a network with the plugin AND before deserializing an engine that contains it.
"""
from __future__ import annotations

import ctypes
import os
from pathlib import Path

from .contract import INIT_FUNCTION, LIBRARY_NAME, PLUGIN_NAMESPACE

ENV_VAR = "AUTOJUDGE_PLUGIN_LIB"
_loaded: dict[str, ctypes.CDLL] = {}


def plugin_library_path(path: str | os.PathLike | None = None) -> Path:
    """The library to load: ``path``, else ``$AUTOJUDGE_PLUGIN_LIB``; it must exist."""
    chosen = path if path is not None else os.environ.get(ENV_VAR)
    if not chosen:
        raise FileNotFoundError(f"no AutoJudge plugin library given: pass its path or set {ENV_VAR} to the "
                                f"{LIBRARY_NAME} built by `trtllm-autojudge build-plugin`")
    p = Path(chosen).expanduser().resolve()
    if not p.is_file():
        raise FileNotFoundError(f"AutoJudge plugin library {p} does not exist: build it with "
                                f"`trtllm-autojudge build-plugin` or fix the path")
    return p


def load_plugin_library(path: str | os.PathLike | None = None) -> ctypes.CDLL:
    """Load the library once per process and register its creators in the ``autojudge`` namespace."""
    p = plugin_library_path(path)
    key = str(p)
    if key in _loaded:
        return _loaded[key]
    handle = ctypes.CDLL(key, mode=ctypes.RTLD_GLOBAL)
    try:
        init = getattr(handle, INIT_FUNCTION)
    except AttributeError as e:
        raise ImportError(f"{p} does not export {INIT_FUNCTION}: it is not the AutoJudge plugin library") from e
    init.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
    init.restype = ctypes.c_bool
    if not init(None, PLUGIN_NAMESPACE.encode("utf-8")):
        raise RuntimeError(f"{INIT_FUNCTION}(nullptr, {PLUGIN_NAMESPACE!r}) in {p} returned false: the creators were "
                           f"not registered (see TensorRT's log for the reason)")
    _loaded[key] = handle
    return handle

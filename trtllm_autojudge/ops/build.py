"""Find or build the compiled libraries of ``plugins/`` (through ``build_scripts/build_plugin.py``).

The libraries are built from a source checkout: the repository's ``plugins/`` folder next to this
package. ``$AUTOJUDGE_HOST_LIBRARY`` points at a prebuilt host library instead;
``$AUTOJUDGE_PLUGIN_BUILD_DIR`` moves the build folder (default ``build/plugins``).
"""
from __future__ import annotations

import functools
import importlib.util
import sys
from pathlib import Path
from types import ModuleType

REPO_ROOT = Path(__file__).resolve().parents[2]
BUILD_SCRIPT = REPO_ROOT / "build_scripts" / "build_plugin.py"
PLUGIN_SOURCES = REPO_ROOT / "plugins"


def build_script() -> ModuleType:
    """``build_scripts/build_plugin.py`` as a module (loaded once per process)."""
    name = "autojudge_build_plugin"
    if name in sys.modules:
        return sys.modules[name]
    if not BUILD_SCRIPT.is_file() or not (PLUGIN_SOURCES / "CMakeLists.txt").is_file():
        raise FileNotFoundError(
            f"the plugin sources are not next to this package ({PLUGIN_SOURCES} and {BUILD_SCRIPT}): build the "
            f"libraries from a source checkout with `trtllm-autojudge build-plugin`, or set AUTOJUDGE_HOST_LIBRARY to "
            f"a built libautojudge_host.so")
    spec = importlib.util.spec_from_file_location(name, BUILD_SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def cuda_toolchain_available() -> bool:
    """nvcc and the TensorRT headers are present (the plugin and kernels can be compiled here)."""
    script = build_script()
    if script.find_nvcc() is None:
        return False
    try:
        script.find_tensorrt_include()
    except script.BuildError:
        return False
    return True


@functools.lru_cache(maxsize=None)
def ensure_built(host_only: bool = False):
    """Build (incrementally, once per process) and return the build script's ``BuildResult``.

    Raises the build script's ``BuildError`` with what to change when a tool is missing or a step
    fails.
    """
    return build_script().build(host_only=host_only)

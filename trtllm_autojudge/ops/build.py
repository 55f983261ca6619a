"""Find or build the compiled libraries of ``plugins/`` (through :mod:`.plugin_build`).

The libraries are built from a source checkout: the repository's ``plugins/`` folder next to this
package. ``$AUTOJUDGE_HOST_LIBRARY`` points at a prebuilt host library instead;
``$AUTOJUDGE_PLUGIN_BUILD_DIR`` moves the build folder (default ``build/plugins``).
"""
from __future__ import annotations

import functools
from types import ModuleType

from . import plugin_build


def build_script() -> ModuleType:
    """The plugin builder (:mod:`.plugin_build`), once the plugin sources are known to be next to
    this package."""
    if not (plugin_build.SOURCE_DIR / "CMakeLists.txt").is_file():
        raise FileNotFoundError(
            f"the plugin sources are not next to this package ({plugin_build.SOURCE_DIR}): build the libraries "
            f"from a source checkout with `trtllm-autojudge build-plugin`, or set AUTOJUDGE_HOST_LIBRARY to a built "
            f"libautojudge_host.so")
    return plugin_build


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

"""Where the ``serve`` extra put Triton, and what its Python backend needs to run here.

The ``nvidia-pytriton`` wheel (``pip install -e '.[serve]'``) ships a Triton Inference Server (core
2.51) under ``pytriton/tritonserver/``: ``bin/tritonserver``, ``backends/python/`` and one Python
backend stub per Python version (``python_backend_stubs/3.X/``); its shared libraries lie in
``site-packages/nvidia_pytriton.libs``. A Python model loads only when (each was checked by leaving
it out, see docs/serving.md):

- the backend folder holds the stub built for THIS interpreter's version (:meth:`TritonInstall.backend_directory`);
- ``nvidia_pytriton.libs`` is on ``LD_LIBRARY_PATH``: the copied stub's RPATH no longer reaches it,
  and without it the stub never starts and the model load hangs with no timeout;
- this interpreter's ``LIBDIR`` is on ``LD_LIBRARY_PATH``: the stub links ``libpython3.X.so`` of a
  shared build, and would otherwise load the system's, of another patch release;
- this environment's ``bin/`` comes first on ``PATH``: the stub embeds an isolated interpreter
  (``PYTHONPATH`` is ignored) that finds its prefix, so this environment's packages, through
  ``python3`` on ``PATH``;
- numpy < 2 is installed: under numpy 2 the stub corrupts text (BYTES) tensors.

The server sets nothing for speed: OpenMP keeps its defaults, under which a process's idle threads
spin briefly between operations, as in process. The draft and target stand-ins are two processes on
the same cores, so with several requests in flight each gives every request one share of the cores
(:func:`trtllm_autojudge.trt.triton.stand_ins.share_threads`) rather than spin on the cores the
other computes on (docs/serving.md, "Where the served time goes").
"""
from __future__ import annotations

import importlib.metadata
import importlib.util
import os
import shutil
import sys
import sysconfig
from dataclasses import dataclass
from pathlib import Path

INSTALL_HINT = "pip install -e '.[serve]' (scripts/setup_env.sh installs it)"


class ServerUnavailable(RuntimeError):
    """The server cannot run from this environment; the message says what to install or change."""


@dataclass(frozen=True)
class TritonInstall:
    root: Path  # pytriton/tritonserver
    libs: Path  # site-packages/nvidia_pytriton.libs
    python_version: str  # "3.11": the stub this interpreter needs

    @property
    def server(self) -> Path:
        return self.root / "bin" / "tritonserver"

    @property
    def stub(self) -> Path:
        return self.root / "python_backend_stubs" / self.python_version / "triton_python_backend_stub"

    def backend_directory(self, dest: str | Path) -> Path:
        """Lay out ``dest/python``: the wheel's Python backend with this interpreter's stub beside it
        (``tritonserver --backend-directory dest``). Returns ``dest``."""
        dest = Path(dest)
        python = dest / "python"
        if python.exists():
            shutil.rmtree(python)
        shutil.copytree(self.root / "backends" / "python", python)
        shutil.copy2(self.stub, python / self.stub.name)
        return dest

    def environment(self, base: dict[str, str] | None = None) -> dict[str, str]:
        """``base`` (default this process's environment) with the library path and PATH the stub needs."""
        env = dict(os.environ if base is None else base)
        libdir = sysconfig.get_config_var("LIBDIR")
        env["LD_LIBRARY_PATH"] = os.pathsep.join(p for p in (libdir, str(self.libs), env.get("LD_LIBRARY_PATH")) if p)
        env["PATH"] = os.pathsep.join(p for p in (str(Path(sys.prefix) / "bin"), env.get("PATH")) if p)
        return env


def find_triton() -> TritonInstall:
    """The server of the ``serve`` extra, checked against this interpreter; :class:`ServerUnavailable`
    names what to install or change."""
    spec = importlib.util.find_spec("pytriton")
    if spec is None or not spec.submodule_search_locations:
        raise ServerUnavailable(f"the Triton server is not installed in this environment ({sys.prefix}): {INSTALL_HINT} "
                                f"installs nvidia-pytriton, which ships tritonserver")
    package = Path(list(spec.submodule_search_locations)[0])
    version = "%d.%d" % sys.version_info[:2]
    install = TritonInstall(package / "tritonserver", package.parent / "nvidia_pytriton.libs", version)
    if not install.server.is_file():
        raise ServerUnavailable(f"{install.server} is missing: reinstall nvidia-pytriton ({INSTALL_HINT})")
    if not install.stub.is_file():
        shipped = sorted(p.name for p in (install.root / "python_backend_stubs").iterdir())
        raise ServerUnavailable(f"nvidia-pytriton ships Python backend stubs for {shipped}, none for this Python "
                                f"{version}: serve from a virtualenv of one of those versions")
    if sysconfig.get_config_var("Py_ENABLE_SHARED") != 1:
        raise ServerUnavailable(f"{sys.executable} is not a shared build of Python: the Python backend's stub links "
                                f"libpython{version}.so. Use a Python configured with --enable-shared (pyenv: "
                                f"PYTHON_CONFIGURE_OPTS=--enable-shared pyenv install {version})")
    numpy_version = importlib.metadata.version("numpy")
    if int(numpy_version.split(".")[0]) >= 2:
        raise ServerUnavailable(f"numpy {numpy_version} is installed: under numpy 2 the Python backend's stub corrupts "
                                f"text tensors. {INSTALL_HINT} pins numpy<2")
    return install

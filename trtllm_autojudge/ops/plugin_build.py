#!/usr/bin/env python3
"""Build the AutoJudge acceptance libraries in ``plugins/`` with CMake.

Outputs (under the build folder, default ``build/plugins`` in the repository):

- ``lib/libautojudge_host.so``: the host core behind a C ABI (needs only a C++ compiler);
- ``lib/libautojudge_trt_plugin.so``: the ``AutoJudgeAccept`` TensorRT plugin and its CUDA kernels
  (needs nvcc and the TensorRT 10 headers; links no libnvinfer);
- ``bin/autojudge_plugin_harness``: the host harness of the plugin (``tests/test_plugin_host.py``);
- ``ptxas_report.txt``: the ``-Xptxas -v`` report of every kernel for every target, checked for
  register spills and local memory (the build fails when there are any).

TensorRT headers: ``--tensorrt-root`` or ``$TENSORRT_ROOT`` (``<root>/include/NvInferRuntime.h``),
else the copy in the ``kernel-lens`` wheel (``pip install --no-deps kernel-lens==2.0.1``).

Usage: ``trtllm-autojudge build-plugin`` or ``python build_scripts/build_plugin.py`` (``[--build-dir DIR]
[--host-only] ...``); from Python, ``main(argv) -> int`` or ``build(...) -> BuildResult``.
"""
from __future__ import annotations

import argparse
import fcntl
import importlib.util
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]  # the source checkout holding plugins/
SOURCE_DIR = REPO / "plugins"
DEFAULT_BUILD_DIR = REPO / "build" / "plugins"
DEFAULT_CUDA_ARCHS = "80-real;90-real;100"  # sm_80, sm_90, sm_100 code + compute_100 PTX


class BuildError(RuntimeError):
    """A build step failed; the message says what to change."""


@dataclass
class KernelReport:
    """ptxas numbers of one kernel entry compiled for one target."""

    kernel: str
    arch: str
    registers: int
    stack_bytes: int
    spill_store_bytes: int
    spill_load_bytes: int
    shared_bytes: int


@dataclass
class BuildResult:
    build_dir: Path
    host_library: Path
    plugin_library: Path | None  # None for --host-only
    harness: Path | None
    ptxas_report: Path | None
    build_log: Path
    kernels: list[KernelReport]


def find_nvcc() -> Path | None:
    for candidate in (os.environ.get("CUDACXX"), shutil.which("nvcc"), "/usr/local/cuda/bin/nvcc"):
        if candidate and Path(candidate).is_file():
            return Path(candidate)
    return None


def find_tensorrt_include(tensorrt_root: str | None = None) -> Path:
    """The folder holding ``NvInferRuntime.h``."""
    root = tensorrt_root or os.environ.get("TENSORRT_ROOT")
    if root:
        for include in (Path(root) / "include", Path(root)):
            if (include / "NvInferRuntime.h").is_file():
                return include
        raise BuildError(f"TensorRT root {root} has no include/NvInferRuntime.h: point --tensorrt-root (or "
                         f"TENSORRT_ROOT) at a TensorRT 10 installation")
    spec = importlib.util.find_spec("kernel_lens")
    if spec and spec.submodule_search_locations:
        include = Path(list(spec.submodule_search_locations)[0]) / "include" / "tensorrt"
        if (include / "NvInferRuntime.h").is_file():
            return include
    raise BuildError("TensorRT headers not found: set TENSORRT_ROOT to a TensorRT 10 installation, or install the "
                     "headers with `pip install --no-deps kernel-lens==2.0.1`")


def _run(command: list[str], log: Path, what: str) -> str:
    done = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    with log.open("a") as f:
        f.write("$ " + " ".join(command) + "\n" + done.stdout + "\n")
    if done.returncode != 0:
        tail = "\n".join(done.stdout.splitlines()[-40:])
        raise BuildError(f"{what} failed (full log: {log}):\n{tail}")
    return done.stdout


def _demangle(names: list[str]) -> dict[str, str]:
    cxxfilt = shutil.which("c++filt")
    if not cxxfilt or not names:
        return {n: n for n in names}
    done = subprocess.run([cxxfilt], input="\n".join(names), capture_output=True, text=True)
    lines = done.stdout.splitlines()
    return dict(zip(names, lines)) if done.returncode == 0 and len(lines) == len(names) else {n: n for n in names}


def parse_ptxas(text: str) -> list[KernelReport]:
    """Kernel entries of an ``-Xptxas -v`` report (device functions that are not entries are skipped)."""
    reports, entry, arch, props = [], None, None, None
    for line in text.splitlines():
        if m := re.search(r"Compiling entry function '(\S+)' for '(sm_\d+a?)'", line):
            entry, arch, props = m.group(1), m.group(2), None
        elif entry and (m := re.search(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads",
                                       line)):
            props = tuple(int(g) for g in m.groups())
        elif entry and props and (m := re.search(r"Used (\d+) registers", line)):
            smem = re.search(r"(\d+) bytes smem", line)
            reports.append(KernelReport(entry, arch, int(m.group(1)), *props, int(smem.group(1)) if smem else 0))
            entry = None
    names = _demangle(sorted({r.kernel for r in reports}))
    for r in reports:
        r.kernel = _short_kernel_name(names[r.kernel])
    return reports


def _short_kernel_name(demangled: str) -> str:
    """``void ns::(anonymous namespace)::k<T>(args)`` -> ``k<T>``."""
    name = demangled.removeprefix("void ").replace("(anonymous namespace)::", "")
    name = name.split("(", 1)[0]
    return name.rsplit("::", 1)[-1] if "<" not in name else name[name.rfind("::", 0, name.index("<")) + 2:]


def real_targets(cuda_archs: str) -> list[str]:
    """``sm_XX`` targets that CMAKE_CUDA_ARCHITECTURES compiles to machine code ("80-real;100" -> sm_80, sm_100)."""
    return [f"sm_{a.split('-')[0]}" for a in cuda_archs.replace(",", ";").split(";") if a and not a.endswith("-virtual")]


def check_ptxas(reports: list[KernelReport], text: str, targets: list[str]) -> list[str]:
    """Problems: spills, stack frames (local memory), lmem warnings, a kernel missing a target."""
    problems = [f"{r.kernel} on {r.arch}: {r.stack_bytes} bytes stack frame, {r.spill_store_bytes}/"
                f"{r.spill_load_bytes} bytes spill stores/loads"
                for r in reports if r.stack_bytes or r.spill_store_bytes or r.spill_load_bytes]
    problems += [line.strip() for line in text.splitlines() if re.search(r"[Ll]ocal memory|lmem", line)
                 and "0 bytes lmem" not in line]
    kernels = {r.kernel for r in reports}
    for kernel in sorted(kernels):
        archs = {r.arch for r in reports if r.kernel == kernel}
        problems += [f"{kernel}: no {sm} code in the report" for sm in targets if sm not in archs]
    if not reports:
        problems.append("the ptxas report lists no kernel")
    return problems


def _format_report(reports: list[KernelReport]) -> str:
    lines = [f"{'kernel':<48} {'arch':<7} {'regs':>4} {'stack':>5} {'spill st/ld':>11} {'smem':>5}"]
    for r in sorted(reports, key=lambda r: (r.kernel, r.arch)):
        lines.append(f"{r.kernel:<48} {r.arch:<7} {r.registers:>4} {r.stack_bytes:>5} "
                     f"{r.spill_store_bytes:>5}/{r.spill_load_bytes:<5} {r.shared_bytes:>5}")
    return "\n".join(lines) + "\n"


def build(build_dir: str | Path | None = None, *, tensorrt_root: str | None = None, host_only: bool = False,
          cuda_archs: str = DEFAULT_CUDA_ARCHS, build_type: str = "Release", jobs: int | None = None) -> BuildResult:
    """Configure and build (incrementally) into ``build_dir``; raise :class:`BuildError` with a reason."""
    build_dir = Path(build_dir or os.environ.get("AUTOJUDGE_PLUGIN_BUILD_DIR") or DEFAULT_BUILD_DIR).resolve()
    cmake = shutil.which("cmake")
    if cmake is None:
        raise BuildError("cmake not found on PATH: install CMake >= 3.24 (apt-get install cmake, or pip install cmake)")
    build_dir.mkdir(parents=True, exist_ok=True)
    with open(build_dir / ".build.lock", "w") as lock:  # one build at a time per folder (parallel test runs)
        fcntl.flock(lock, fcntl.LOCK_EX)
        return _build_locked(cmake, build_dir, tensorrt_root, host_only, cuda_archs, build_type, jobs)


def _build_locked(cmake: str, build_dir: Path, tensorrt_root: str | None, host_only: bool, cuda_archs: str,
                  build_type: str, jobs: int | None) -> BuildResult:
    log = build_dir / "build.log"
    log.write_text("")
    defines = [f"-DCMAKE_BUILD_TYPE={build_type}", f"-DAUTOJUDGE_BUILD_CUDA={'OFF' if host_only else 'ON'}",
               f"-DPython3_EXECUTABLE={sys.executable}"]
    if not host_only:
        nvcc = find_nvcc()
        if nvcc is None:
            raise BuildError("nvcc not found (PATH, $CUDACXX, /usr/local/cuda/bin): install the CUDA toolkit "
                             "(12.8 or newer for sm_100), or build only the host library with --host-only")
        defines += [f"-DCMAKE_CUDA_COMPILER={nvcc}", f"-DTENSORRT_INCLUDE_DIR={find_tensorrt_include(tensorrt_root)}",
                    f"-DCMAKE_CUDA_ARCHITECTURES={cuda_archs}"]
    cache = build_dir / "CMakeCache.txt"
    generator = []
    if not cache.is_file():
        generator = ["-G", "Ninja"] if shutil.which("ninja") else ["-G", "Unix Makefiles"]
    _run([cmake, "-S", str(SOURCE_DIR), "-B", str(build_dir), *generator, *defines], log, "CMake configure")
    _run([cmake, "--build", str(build_dir), "-j", str(jobs or os.cpu_count() or 2)], log, "CMake build")

    lib, binary = build_dir / "lib", build_dir / "bin"
    result = BuildResult(build_dir, lib / "libautojudge_host.so", None, None, None, log, [])
    if host_only:
        return result
    result.plugin_library = lib / "libautojudge_trt_plugin.so"
    result.harness = binary / "autojudge_plugin_harness"
    text = "".join(p.read_text() for p in sorted(build_dir.rglob("*.ptxas.log")))
    result.kernels = parse_ptxas(text)
    result.ptxas_report = build_dir / "ptxas_report.txt"
    result.ptxas_report.write_text(_format_report(result.kernels) + "\n# raw -Xptxas -v output\n" + text)
    problems = check_ptxas(result.kernels, text, real_targets(cuda_archs))
    if problems:
        raise BuildError("the kernels spill registers or use local memory (see " + str(result.ptxas_report)
                         + "):\n  " + "\n  ".join(problems))
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="build_plugin.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("--build-dir", default=None,
                        help=f"build folder (default $AUTOJUDGE_PLUGIN_BUILD_DIR or {DEFAULT_BUILD_DIR})")
    parser.add_argument("--tensorrt-root", default=None,
                        help="TensorRT installation (default $TENSORRT_ROOT, else the kernel-lens wheel's headers)")
    parser.add_argument("--host-only", action="store_true",
                        help="build only the host core library (no nvcc, no TensorRT headers needed)")
    parser.add_argument("--cuda-archs", default=DEFAULT_CUDA_ARCHS,
                        help=f"CMAKE_CUDA_ARCHITECTURES (default {DEFAULT_CUDA_ARCHS})")
    parser.add_argument("--build-type", default="Release", choices=["Release", "RelWithDebInfo", "Debug"])
    parser.add_argument("-j", "--jobs", type=int, default=None, help="parallel compile jobs (default: all cores)")
    args = parser.parse_args(argv)
    try:
        result = build(args.build_dir, tensorrt_root=args.tensorrt_root, host_only=args.host_only,
                       cuda_archs=args.cuda_archs, build_type=args.build_type, jobs=args.jobs)
    except BuildError as e:
        print(f"build_plugin: {e}", file=sys.stderr)
        return 1
    print(f"host library:   {result.host_library}")
    if result.plugin_library:
        print(f"plugin library: {result.plugin_library}")
        print(f"plugin harness: {result.harness}")
        print(f"ptxas report:   {result.ptxas_report} ({len(result.kernels)} kernel entries, no spills, "
              f"no local memory)")
    print(f"build log:      {result.build_log}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The AutoJudgeAccept TensorRT plugin library on a machine without a GPU or libnvinfer.

build_scripts/build_plugin.py builds libautojudge_trt_plugin.so (kernels for sm_80/sm_90/sm_100)
and plugins/tests/plugin_harness.cpp, which dlopens the library and exercises its host-side
methods (creator, fields, types, formats, shapes, serialization, clone, attach, enqueue checks)."""
import os
import shutil
import subprocess

import pytest

from trtllm_autojudge.ops.build import build_script, cuda_toolchain_available

pytestmark = pytest.mark.skipif(
    shutil.which("cmake") is None or not cuda_toolchain_available(),
    reason="needs cmake, nvcc and the TensorRT headers (TENSORRT_ROOT or the kernel-lens wheel) to build the plugin")

HARNESS_CHECKS = (
    "creators", "init_registration", "create_plugin", "reject_bad_fields", "output_data_types", "format_combinations",
    "lookahead_inputs", "output_shapes", "configure_shapes", "workspace", "serialization_roundtrip", "clone", "attach_to_context",
    "enqueue_rejects_bad_shapes", "logger_finder", "register_on_load", "tree_logits_mode")


@pytest.fixture(scope="module")
def built():
    from trtllm_autojudge.ops.build import ensure_built
    return ensure_built(host_only=False)


def run_harness(built, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    environment = {k: v for k, v in os.environ.items() if k != "AUTOJUDGE_REGISTER_ON_LOAD"}
    return subprocess.run([str(built.harness), str(built.plugin_library), *args], capture_output=True, text=True,
                          timeout=60, env={**environment, **(env or {})})


def test_harness_lists_the_checks_this_file_runs(built):
    assert sorted(run_harness(built, "list").stdout.split()) == sorted(HARNESS_CHECKS)


@pytest.mark.parametrize("check", HARNESS_CHECKS)
def test_plugin_host_method(built, check):
    done = run_harness(built, check)
    assert done.returncode == 0 and f"PASS {check}" in done.stdout, done.stdout + done.stderr


def test_library_registers_on_load_when_asked(built):
    """AUTOJUDGE_REGISTER_ON_LOAD=1 (LD_PRELOAD into tritonserver): the creator is registered by loading alone."""
    done = run_harness(built, "register_on_load", env={"AUTOJUDGE_REGISTER_ON_LOAD": "1"})
    assert done.returncode == 0 and "PASS register_on_load" in done.stdout, done.stdout + done.stderr


def test_plugin_library_exports_the_entry_points_and_needs_no_libnvinfer(built):
    nm = shutil.which("nm")
    if nm is None:
        pytest.skip("needs nm (binutils) to list the library's symbols")
    defined = subprocess.run([nm, "-D", "--defined-only", str(built.plugin_library)], capture_output=True,
                             text=True).stdout.split()
    for entry in ("initAutoJudgePlugins", "getCreators", "setLoggerFinder"):
        assert entry in defined
    undefined = subprocess.run([nm, "-D", "--undefined-only", str(built.plugin_library)], capture_output=True,
                               text=True).stdout
    assert "getPluginRegistry" not in undefined and "nvinfer" not in undefined.lower()
    needed = subprocess.run(["readelf", "-d", str(built.plugin_library)], capture_output=True, text=True).stdout
    assert "libnvinfer" not in needed and "libcudart" not in needed  # the CUDA runtime is linked statically


def test_every_kernel_compiles_for_every_target_without_spills(built):
    kernels = {r.kernel for r in built.kernels}
    assert {"acceptTreeKernel", "rewriteLogitsKernel<float>", "rewriteLogitsKernel<__half>",
            "rewriteLogitsKernel<__nv_bfloat16>", "rewriteTreeLogitsKernel<float>", "rewriteTreeLogitsKernel<__half>",
            "rewriteTreeLogitsKernel<__nv_bfloat16>"} <= kernels
    assert sum(k.startswith("scoreNodesKernel<") for k in kernels) == 12  # 3 logits types x copy or not x LS or not
    for kernel in kernels:
        assert sorted(r.arch for r in built.kernels if r.kernel == kernel) == ["sm_100", "sm_80", "sm_90"], kernel
    for r in built.kernels:
        assert (r.stack_bytes, r.spill_store_bytes, r.spill_load_bytes) == (0, 0, 0), r
    report = built.ptxas_report.read_text()
    assert "Compiling entry function" in report and "bytes spill stores" in report  # the raw -Xptxas -v output


def test_ptxas_check_flags_spills_and_local_memory():
    script = build_script()
    text = ("ptxas info    : Compiling entry function '_Z6kernelv' for 'sm_80'\n"
            "ptxas info    : Function properties for _Z6kernelv\n"
            "    16 bytes stack frame, 8 bytes spill stores, 8 bytes spill loads\n"
            "ptxas info    : Used 255 registers, used 0 barriers, 16 bytes lmem\n")
    reports = script.parse_ptxas(text)
    assert [(r.arch, r.registers, r.stack_bytes, r.spill_store_bytes) for r in reports] == [("sm_80", 255, 16, 8)]
    assert script.real_targets(script.DEFAULT_CUDA_ARCHS) == ["sm_80", "sm_90", "sm_100"]
    problems = "\n".join(script.check_ptxas(reports, text, ["sm_80", "sm_90"]))
    assert "8/8 bytes spill stores/loads" in problems and "16 bytes lmem" in problems and "no sm_90 code" in problems


def test_build_script_says_what_is_missing(monkeypatch, tmp_path):
    script = build_script()
    monkeypatch.setattr(script, "find_nvcc", lambda: None)
    with pytest.raises(script.BuildError, match="nvcc not found.*--host-only"):
        script.build(tmp_path / "no-nvcc")
    monkeypatch.undo()
    with pytest.raises(script.BuildError, match="has no include/NvInferRuntime.h"):
        script.find_tensorrt_include(str(tmp_path))
    monkeypatch.setattr(shutil, "which", lambda name: None)
    assert script.main(["--build-dir", str(tmp_path / "no-cmake")]) == 1

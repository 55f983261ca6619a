"""`trtllm-autojudge serve`: serve AutoJudge from a real Triton Inference Server on this CPU.

Writes the CPU route's repository (:mod:`trtllm_autojudge.trt.triton.cpu`: the embedded pair and the
task's shipped judge by default, or the pair you name as `generate` does), starts the ``tritonserver``
of the ``serve`` extra on 127.0.0.1 (nothing is installed at run time), waits until every model has
loaded, prints the endpoints and a request to paste, and stops the server on Ctrl-C or SIGTERM.
"""
from __future__ import annotations

import argparse
import shutil
import signal
import tempfile
import threading
from pathlib import Path

from ..trt.triton.cpu import CPU_MODELS, make_cpu_repository
from ..trt.triton.cpu_args import add_cpu_route_args, cpu_route_from_args
from .client import BLS
from .install import ServerUnavailable, find_triton
from .server import HOST, Ports, ServerError, TritonServer, check_ports_free

EXAMPLE_QUESTION = "Tom has 3 apples and buys 5 more bags of 4 apples each. How many apples does he have now?"


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="trtllm-autojudge serve", description=__doc__.split("\n\n")[0])
    g = p.add_argument_group("server")
    g.add_argument("--http-port", type=int, default=8000)
    g.add_argument("--grpc-port", type=int, default=8001)
    g.add_argument("--metrics-port", type=int, default=8002)
    g.add_argument("--bls-instances", type=int, default=4, help="requests served at once (default 4)")
    g.add_argument("--repo", default=None, help="serve this model repository as it is instead of writing one")
    g.add_argument("--work-dir", default=None, help="where the repository, the backend folder and the server log go "
                   "(default: a temporary folder, removed at exit)")
    g.add_argument("--startup-timeout", type=float, default=900.0, help="seconds to wait for the models to load")
    add_cpu_route_args(p.add_argument_group("models (as `trtllm-autojudge generate` names them)"))
    return p.parse_args(argv)


def endpoints(server: TritonServer, max_tokens: int = 256) -> str:
    ports = server.ports
    body = f'{{"text_input": "{EXAMPLE_QUESTION}", "max_tokens": {max_tokens}, "threshold": 0}}'
    return "\n".join([
        f"AutoJudge is served by Triton on {HOST} (model {BLS}):",
        f"  HTTP     http://{HOST}:{ports.http}  (POST /v2/models/{BLS}/generate: one answer)",
        f"  gRPC     {HOST}:{ports.grpc}  (stream API: a response per cycle with stream=true)",
        f"  metrics  http://{HOST}:{ports.metrics}/metrics",
        "Ask (threshold 0 is lossless; leave it out for the judge's own):",
        f"  curl -s http://{HOST}:{ports.http}/v2/models/{BLS}/generate -d '{body}'",
        f"  python -m trtllm_autojudge.serving.client \"{EXAMPLE_QUESTION}\" --grpc {HOST}:{ports.grpc} --stream",
        f"Server log: {server.log_path}. Ctrl-C stops the server.",
    ])


def wait_for_signal(server: TritonServer) -> str:
    """Block until SIGINT or SIGTERM, or until the server exits on its own; returns which."""
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    while not stop.wait(1.0):
        if server.process.poll() is not None:
            return f"tritonserver exited on its own (status {server.process.returncode})"
    return "stopping"


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    ports = Ports(args.http_port, args.grpc_port, args.metrics_port)
    try:
        install = find_triton()
        check_ports_free(ports)
    except (ServerUnavailable, ServerError) as e:
        print(f"serve: {e}")
        return 2
    temporary = args.work_dir is None
    work = Path(tempfile.mkdtemp(prefix="autojudge-serve-") if temporary else args.work_dir).absolute()
    server = None
    try:
        if args.repo:
            repo = Path(args.repo).absolute()
        else:
            pair, options = cpu_route_from_args(args)
            repo = work / "repo"
            make_cpu_repository(repo, pair, bls_instances=args.bls_instances, **options)
        server = TritonServer(install, repo, work, ports)
        print(f"starting tritonserver on {HOST} (repository {repo}; loading the models takes a minute or more) ...",
              flush=True)
        server.start()
        server.wait_ready(None if args.repo else CPU_MODELS, timeout=args.startup_timeout)
        print(endpoints(server), flush=True)
        print(wait_for_signal(server), flush=True)
        return 0
    except (ValueError, ServerError) as e:
        print(f"serve: {e}")
        return 1
    except KeyboardInterrupt:  # Ctrl-C while the models load
        print("serve: interrupted while the models loaded")
        return 130
    finally:
        if server is not None:
            code = server.stop()
            print(f"tritonserver stopped (status {code})")
        if temporary:
            shutil.rmtree(work, ignore_errors=True)


"""One ``tritonserver`` process on 127.0.0.1: start it, wait until its models have loaded, stop it.

The server's endpoints open only once its start-up loading has ended, so :meth:`TritonServer.wait_ready`
waits for the HTTP endpoint, then reads each model's state and reason from the repository index:
a model that failed to load is reported with the server's own message (a missing file names its
path), while the others serve (``--exit-on-error=false``). Probes and index reads close their
connection: an open keep-alive connection makes a stopping server wait out its exit timeout.

Each server gives its Python backend's shared-memory regions a prefix of its own
(``shm-region-prefix-name``); :meth:`TritonServer.stop` removes what a crashed stub left of them in
``/dev/shm``.
"""
from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from .install import TritonInstall

HOST = "127.0.0.1"
SHM_DIR = Path("/dev/shm")


@dataclass(frozen=True)
class Ports:
    http: int = 8000
    grpc: int = 8001
    metrics: int = 8002

    def flags(self) -> dict[str, int]:
        return {"--http-port": self.http, "--grpc-port": self.grpc, "--metrics-port": self.metrics}


class ServerError(RuntimeError):
    """The server did not come up, or a model did not load; the message says which and why."""


def free_port() -> int:
    """A port no one listens on now (for tests and benchmarks)."""
    with socket.socket() as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


def check_ports_free(ports: Ports) -> None:
    """Refuse ports another process holds, naming the flag that picks another."""
    for flag, port in ports.flags().items():
        with socket.socket() as s:
            try:
                s.bind((HOST, port))
            except OSError:
                raise ServerError(f"port {port} on {HOST} is in use ({flag}): stop what holds it, or pick a free port "
                                  f"with {flag} PORT") from None


def _request(url: str, data: bytes | None = None, timeout: float = 5.0) -> tuple[int, bytes]:
    req = urllib.request.Request(url, data=data, headers={"Connection": "close"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


class TritonServer:
    """``tritonserver`` serving ``repository`` on :data:`HOST`; its log is ``work_dir/tritonserver.log``."""

    def __init__(self, install: TritonInstall, repository: str | Path, work_dir: str | Path, ports: Ports,
                 log_verbose: int = 0):
        self.install, self.repository, self.work_dir, self.ports = install, Path(repository), Path(work_dir), ports
        self.log_verbose = log_verbose
        self.shm_prefix = f"autojudge_{os.getpid()}_{time.monotonic_ns()}_"
        self.log_path = self.work_dir / "tritonserver.log"
        self.process: subprocess.Popen | None = None

    @property
    def http_url(self) -> str:
        return f"http://{HOST}:{self.ports.http}"

    def command(self) -> list[str]:
        backends = self.install.backend_directory(self.work_dir / "backends")
        args = [str(self.install.server), "--model-repository", str(self.repository),
                "--backend-directory", str(backends), "--http-address", HOST, "--grpc-address", HOST,
                "--metrics-address", HOST, "--allow-gpu-metrics=false", "--pinned-memory-pool-byte-size=0",
                "--exit-on-error=false", f"--backend-config=python,shm-region-prefix-name={self.shm_prefix}",
                f"--log-verbose={self.log_verbose}"]
        for flag, port in self.ports.flags().items():
            args += [flag, str(port)]
        return args

    def start(self) -> "TritonServer":
        check_ports_free(self.ports)
        self.work_dir.mkdir(parents=True, exist_ok=True)
        command = self.command()
        with open(self.log_path, "wb") as log:
            # its own session: a Ctrl-C in the terminal reaches the caller, who stops the server in order
            self.process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                            env=self.install.environment(), start_new_session=True)
        return self

    def log_tail(self, lines: int = 30) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def repository_index(self) -> dict[str, dict]:
        """Model name -> its entry of the repository index (``state``, ``reason``, ``version``)."""
        status, body = _request(f"{self.http_url}/v2/repository/index", data=b"{}")
        if status != 200:
            raise ServerError(f"repository index: HTTP {status} {body[:200]!r}")
        return {m["name"]: m for m in json.loads(body)}

    def wait_ready(self, models: Sequence[str] | None, timeout: float = 300.0) -> dict[str, dict]:
        """Wait for the end of start-up loading; raise :class:`ServerError` unless every one of ``models``
        (None: every model of the repository) is READY, with each failed model's reason. Returns the
        repository index."""
        deadline = time.monotonic() + timeout
        while True:
            if self.process is None or self.process.poll() is not None:
                code = None if self.process is None else self.process.returncode
                raise ServerError(f"tritonserver exited (status {code}) before it served; its log "
                                  f"({self.log_path}) ends:\n{self.log_tail()}")
            try:
                if _request(f"{self.http_url}/v2/health/live", timeout=2.0)[0] == 200:
                    break
            except OSError:
                pass  # endpoints open once loading ends
            if time.monotonic() > deadline:
                raise ServerError(f"tritonserver did not open its endpoints within {timeout:.0f} s; its log "
                                  f"({self.log_path}) ends:\n{self.log_tail()}")
            time.sleep(0.2)
        index = self.repository_index()
        models = list(index) if models is None else models
        failed = {m: index.get(m, {"state": "MISSING", "reason": "not in the repository"}) for m in models
                  if index.get(m, {}).get("state") != "READY"}
        if failed:
            raise ServerError("models that did not load: " + "; ".join(
                f"{m} ({e.get('state')}): {e.get('reason', '')}" for m, e in failed.items()))
        return index

    def stop(self, timeout: float = 60.0) -> int | None:
        """SIGTERM, then SIGKILL after ``timeout`` s; removes this server's shared-memory leftovers.
        Returns the exit status (None when it never started)."""
        code = None
        if self.process is not None:
            if self.process.poll() is None:
                self.process.send_signal(signal.SIGTERM)
                try:
                    self.process.wait(timeout)
                except subprocess.TimeoutExpired:
                    os.killpg(self.process.pid, signal.SIGKILL)
                    self.process.wait()
            code = self.process.returncode
        for leftover in SHM_DIR.glob(f"{self.shm_prefix}*"):
            leftover.unlink(missing_ok=True)
        return code

    def __enter__(self) -> "TritonServer":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

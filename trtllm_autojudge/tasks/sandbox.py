"""Run untrusted code (a model's program or solution) in the sandbox worker, many runs per worker.

One :class:`Sandbox` keeps one worker process (:mod:`.sandbox_worker`) for the process that made
it; every run is a fresh child of the worker under its own limits, so a run costs a fork, not an
interpreter start. A worker that dies is restarted and the run retried once. Threads may share a
Sandbox (eval's questions decoded at once): one request and its reply hold the worker at a time.
"""
from __future__ import annotations

import atexit
import json
import os
import select
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

WORKER = Path(__file__).with_name("sandbox_worker.py")
STATUSES = ("ok", "syntax", "exception", "timeout", "no-answer", "not-a-number")
_REPLY_GRACE_S = 10.0  # how much longer than a run's timeout the worker may take to answer


@dataclass(frozen=True)
class Outcome:
    """What one run gave: ``status`` (one of :data:`STATUSES`), and for ``ok`` in mode ``answer``
    the value of ``answer`` as text with its type name (``int``, ``float``, ``Fraction``, ``Decimal``)."""

    status: str
    value: str | None = None
    type: str | None = None
    error: str | None = None  # the exception's type name, for diagnostics


class Sandbox:
    """The worker of one process; :meth:`run` executes one piece of code and returns its :class:`Outcome`."""

    def __init__(self, timeout_s: float = 2.0, memory_mb: int = 512):
        if timeout_s <= 0 or memory_mb < 64:
            raise ValueError(f"sandbox limits too small: timeout_s={timeout_s} (> 0), memory_mb={memory_mb} (>= 64)")
        self.timeout_s, self.memory_mb = float(timeout_s), int(memory_mb)
        self._proc: subprocess.Popen | None = None
        self._owner = os.getpid()
        self._lock = threading.Lock()  # a request and its reply, one thread at a time
        atexit.register(self.close)

    def _worker(self) -> subprocess.Popen:
        if self._owner != os.getpid():  # a forked copy: that worker belongs to the parent
            self._proc, self._owner = None, os.getpid()
        if self._proc is not None and self._proc.poll() is not None:
            self._close_proc()
        if self._proc is None:
            self._proc = subprocess.Popen(
                [sys.executable, "-I", str(WORKER)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL, env={"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"}, start_new_session=True)
        return self._proc

    def run(self, code: str, mode: str = "answer") -> Outcome:
        """Run ``code``: mode ``answer`` reads its ``answer`` variable, mode ``run`` only whether it completes."""
        if mode not in ("answer", "run"):
            raise ValueError(f"unknown sandbox mode {mode!r}: use 'answer' or 'run'")
        request = json.dumps({"code": code, "mode": mode, "timeout_s": self.timeout_s, "memory_mb": self.memory_mb})
        for attempt in (1, 2):
            with self._lock:
                reply = self._ask(request)
            if reply is not None:
                if reply.get("status") not in STATUSES:
                    raise RuntimeError(f"the sandbox worker could not run the code: {reply.get('error')}")
                return Outcome(reply["status"], reply.get("value"), reply.get("type"), reply.get("error"))
        raise RuntimeError("the sandbox worker died twice on the same code; see the worker's limits in docs/tasks.md")

    def _ask(self, request: str) -> dict | None:
        proc = self._worker()
        try:
            proc.stdin.write(request.encode() + b"\n")
            proc.stdin.flush()
        except (BrokenPipeError, OSError):
            self._close_proc()
            return None
        deadline = time.monotonic() + self.timeout_s + _REPLY_GRACE_S
        line = b""
        fd = proc.stdout.fileno()
        while not line.endswith(b"\n"):
            left = deadline - time.monotonic()
            ready = select.select([fd], [], [], max(left, 0))[0] if left > 0 else []
            chunk = os.read(fd, 65536) if ready else b""
            if not chunk:  # the worker died or hangs: restart it
                self._close_proc()
                return None
            line += chunk
        return json.loads(line)

    def _close_proc(self) -> None:
        proc, self._proc = self._proc, None
        if proc is not None and self._owner == os.getpid():
            proc.kill()
            proc.wait()
            for f in (proc.stdin, proc.stdout):
                f.close()

    def close(self) -> None:
        """Stop the worker (it is restarted by the next run)."""
        with self._lock:
            self._close_proc()

"""The sandbox worker: a small, isolated Python process that runs untrusted code, one fork per run.

Started by :class:`trtllm_autojudge.tasks.sandbox.Sandbox` as ``python -I sandbox_worker.py`` (no
site packages, no environment, standard library only: it never imports trtllm_autojudge). It reads
one JSON request per line on stdin and answers one JSON line on stdout.

Request: ``{"code": str, "mode": "answer" | "run", "timeout_s": float, "memory_mb": int}``.
Reply: ``{"status": ..., "value": str | None, "type": str | None, "error": str | None}`` where
``status`` is ``ok``, ``syntax`` (the code does not compile), ``exception`` (it raised, ran out
of memory or died of a signal), ``timeout`` (wall clock or CPU limit), ``no-answer`` (mode
``answer``: it defined no ``answer``) or ``not-a-number`` (``answer`` is not a number).

Each run is a child forked from this worker, in its own process group and its own temporary
directory, with rlimits on CPU time, address space, file size, open files and core dumps; its
stdin/stdout/stderr are /dev/null. Before the code runs, an audit hook refuses network access,
new processes (fork, exec, spawn, subprocess, os.system), signals to other processes, ctypes, the
modules in :data:`DENIED_MODULES`, and any file write outside the run's directory (mode ``answer``
may not read files outside it either). Mode ``answer`` also runs the code with a short list of
builtins and imports (:data:`PROGRAM_BUILTINS`, :data:`PROGRAM_MODULES`).
The worker kills the child's whole process group when it exceeds the wall clock.
"""
from __future__ import annotations

import json
import os
import resource
import select
import shutil
import signal
import sys
import tempfile
import time

# Modules a program (mode "answer") may import; imported here once, so a run never loads files.
PROGRAM_MODULES = ("math", "fractions", "decimal", "statistics", "itertools", "functools", "collections", "operator")
PROGRAM_BUILTINS = (
    "abs", "all", "any", "bool", "dict", "divmod", "enumerate", "filter", "float", "int", "isinstance", "len", "list",
    "map", "max", "min", "pow", "print", "range", "reversed", "round", "set", "sorted", "str", "sum", "tuple", "zip",
    "ArithmeticError", "Exception", "ValueError", "ZeroDivisionError", "__build_class__",
)
RESULT_LIMIT = 4096  # bytes of a child's result read at most
ANSWER_CHARS = 200  # characters of an answer kept
# File operations allowed inside the run's directory only (reads: only in mode "answer").
_WRITE_EVENTS = ("os.remove", "os.unlink", "os.rename", "os.replace", "os.rmdir", "os.mkdir", "os.symlink", "os.link",
                 "os.truncate", "os.chmod", "os.chown", "os.utime", "os.chdir", "shutil.rmtree", "shutil.copyfile",
                 "shutil.move", "os.chflags", "os.setxattr", "os.removexattr")
_READ_EVENTS = ("os.listdir", "os.scandir")
_DENIED_PREFIXES = ("socket.", "subprocess.", "ctypes.", "os.exec", "os.spawn", "os.posix_spawn", "os.fork",
                    "os.forkpty", "os.system", "os.kill", "os.killpg", "os.putenv", "os.unsetenv", "pty.",
                    "os.add_dll_directory", "winreg.", "_winapi.", "msvcrt.", "urllib.", "http.")
# Modules no run may import (mode "run" may import the rest of the standard library).
DENIED_MODULES = frozenset(("socket", "_socket", "ssl", "_ssl", "subprocess", "_posixsubprocess", "multiprocessing",
                            "_multiprocessing", "ctypes", "_ctypes", "pty", "resource", "mmap"))

for _name in PROGRAM_MODULES:
    __import__(_name)


def _audit_hook(workdir: str, allow_reads: bool, allowed_imports: frozenset[str] | None):
    """The audit hook of one run: ``allowed_imports`` None allows every module but :data:`DENIED_MODULES`."""
    def inside(path) -> bool:
        if isinstance(path, int):  # an already open file descriptor
            return True
        try:
            real = os.path.realpath(os.fsdecode(path))
        except (TypeError, ValueError):
            return False
        return real == workdir or real.startswith(workdir + os.sep)

    def hook(event: str, args: tuple) -> None:
        if event.startswith(_DENIED_PREFIXES):
            raise PermissionError(f"{event} is not allowed in the autojudge sandbox")
        if event == "import":
            top = str(args[0]).partition(".")[0]
            if top in DENIED_MODULES or (allowed_imports is not None and top not in allowed_imports):
                raise ImportError(f"import of {args[0]} is not allowed in the autojudge sandbox")
        if event == "open":
            mode, flags = args[1], args[2] if len(args) > 2 else 0
            writes = (isinstance(mode, str) and any(c in mode for c in "wax+")) or (
                isinstance(flags, int) and flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_TRUNC))
            paths = [] if (allow_reads and not writes) else [args[0]]
        elif event in _WRITE_EVENTS:
            paths = [a for a in args[:2] if isinstance(a, (str, bytes, os.PathLike))] or [args[0]]
        elif event in _READ_EVENTS and not allow_reads:
            paths = [args[0] if args and args[0] is not None else "."]
        else:
            return
        if not all(inside(p) for p in paths):
            raise PermissionError(f"{event} outside the sandbox's directory is not allowed")

    return hook


def _safe_import(name, globals=None, locals=None, fromlist=(), level=0):
    if level != 0 or name.partition(".")[0] not in PROGRAM_MODULES:
        raise ImportError(f"import of {name} is not allowed in a program (allowed: {', '.join(PROGRAM_MODULES)})")
    return __import__(name, globals, locals, fromlist, level)


def _describe(value) -> dict:
    """How an ``answer`` value travels back: its type and exact text (the client canonicalises it)."""
    import decimal
    import fractions

    if isinstance(value, bool) or not isinstance(value, (int, float, fractions.Fraction, decimal.Decimal)):
        return {"status": "not-a-number", "type": type(value).__name__}
    try:
        text = repr(value) if isinstance(value, float) else str(value)
    except ValueError:  # an int too long to print
        return {"status": "not-a-number", "type": type(value).__name__}
    if len(text) > ANSWER_CHARS:
        return {"status": "not-a-number", "type": type(value).__name__}
    return {"status": "ok", "type": type(value).__name__, "value": text}


def _child(code: str, mode: str, workdir: str, timeout_s: float, memory_mb: int, result_fd: int) -> None:
    """Runs in the forked child; never returns."""
    try:
        os.setpgid(0, 0)
        os.chdir(workdir)
        cpu, memory = int(timeout_s) + 1, memory_mb * 2**20
        for limit, value in ((resource.RLIMIT_CPU, cpu), (resource.RLIMIT_AS, memory), (resource.RLIMIT_FSIZE, 2**20),
                             (resource.RLIMIT_CORE, 0), (resource.RLIMIT_NOFILE, 64)):
            hard = resource.getrlimit(limit)[1]
            value = value if hard == resource.RLIM_INFINITY else min(value, hard)
            resource.setrlimit(limit, (value, value))
        null = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(null, fd)
        result = _run(code, mode, workdir)
    except BaseException as exc:  # noqa: BLE001 - anything that escapes is the program's failure
        result = {"status": "exception", "error": type(exc).__name__}
    try:
        os.write(result_fd, json.dumps(result).encode()[:RESULT_LIMIT])
    finally:
        os._exit(0)


def _run(code: str, mode: str, workdir: str) -> dict:
    try:
        compiled = compile(code, "<program>", "exec")
    except (SyntaxError, ValueError) as exc:  # ValueError: null bytes in the source
        return {"status": "syntax", "error": type(exc).__name__}
    if mode == "answer":
        import builtins

        allowed = {name: getattr(builtins, name) for name in PROGRAM_BUILTINS}
        namespace = {"__builtins__": {**allowed, "__import__": _safe_import}, "__name__": "__program__"}
        sys.addaudithook(_audit_hook(workdir, allow_reads=False, allowed_imports=frozenset(PROGRAM_MODULES)))
    else:
        namespace = {"__name__": "__main__"}
        sys.addaudithook(_audit_hook(workdir, allow_reads=True, allowed_imports=None))
    try:
        exec(compiled, namespace)  # noqa: S102 - this is the sandbox
    except BaseException as exc:  # noqa: BLE001
        return {"status": "exception", "error": type(exc).__name__}
    if mode != "answer":
        return {"status": "ok"}
    if "answer" not in namespace:
        return {"status": "no-answer"}
    return _describe(namespace["answer"])


def run_one(request: dict, root: str) -> dict:
    """Fork a child for one request, wait for it (killing its process group on timeout), clean up."""
    timeout_s, memory_mb = float(request["timeout_s"]), int(request["memory_mb"])
    workdir = os.path.realpath(tempfile.mkdtemp(dir=root))
    read_fd, write_fd = os.pipe()
    sys.stdout.flush()
    pid = os.fork()
    if pid == 0:
        os.close(read_fd)
        _child(request["code"], request["mode"], workdir, timeout_s, memory_mb, write_fd)
    os.close(write_fd)
    try:
        os.setpgid(pid, pid)  # also done by the child; whichever runs first
    except OSError:
        pass
    deadline = time.monotonic() + timeout_s
    chunks, timed_out = [], False
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            timed_out = True
            break
        ready, _, _ = select.select([read_fd], [], [], left)
        if not ready:
            continue
        chunk = os.read(read_fd, RESULT_LIMIT)
        if not chunk:  # the child closed the pipe: it has finished (or died)
            break
        chunks.append(chunk)
    os.close(read_fd)
    try:
        os.killpg(pid, signal.SIGKILL)  # the child and anything it left behind
    except (ProcessLookupError, PermissionError):
        pass
    _, status = os.waitpid(pid, 0)
    shutil.rmtree(workdir, ignore_errors=True)
    if timed_out:
        return {"status": "timeout"}
    try:
        result = json.loads(b"".join(chunks)[:RESULT_LIMIT])
    except ValueError:
        result = None
    if not isinstance(result, dict) or "status" not in result:
        killed_by = os.WTERMSIG(status) if os.WIFSIGNALED(status) else None
        if killed_by in (signal.SIGXCPU, signal.SIGKILL):  # the CPU limit
            return {"status": "timeout"}
        return {"status": "exception", "error": f"signal {killed_by}" if killed_by else "no result"}
    return result


def main() -> int:
    root = tempfile.mkdtemp(prefix="autojudge-sandbox-")
    try:
        for line in sys.stdin:
            try:
                reply = run_one(json.loads(line), root)
            except Exception as exc:  # noqa: BLE001 - a malformed request; the worker keeps serving
                reply = {"status": "worker-error", "error": f"{type(exc).__name__}: {exc}"}
            sys.stdout.write(json.dumps(reply) + "\n")
            sys.stdout.flush()
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""A real Triton Inference Server on this CPU, started by `trtllm-autojudge serve` on the tiny pair and
asked with tritonclient over HTTP and gRPC: answers equal the CPU runtime's, streams send a response
per cycle, bad requests get errors that name the input and the limit, a cancelled stream frees its
caches, and the server stops cleanly on SIGINT."""
from __future__ import annotations

import json
import math
import os
import queue
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient

from tiny_served_pair import CONTEXT
from trtllm_autojudge.decoding.modes import JudgeRule
from trtllm_autojudge.decoding.speculative import speculative_generate
from trtllm_autojudge.decoding.tree import DraftTree
from trtllm_autojudge.judge.head import JudgeHead
from trtllm_autojudge.models.loading import load_pair
from trtllm_autojudge.serving import cli as serve_cli
from trtllm_autojudge.serving.client import BLS, ServedError, ask_grpc, ask_http, grpc_inputs, request_values
from trtllm_autojudge.serving.server import SHM_DIR, Ports, free_port
from trtllm_autojudge.tasks import load_task
from trtllm_autojudge.trt.triton.cpu import CPU_MODELS

MAX_DRAFT_TOKENS = 6
QUESTION = "Ann has 3 pens and buys 4 more. How many pens does she have?"
STAND_INS = ("tensorrt_llm_draft", "autojudge_target")


class Served:
    def __init__(self, process: subprocess.Popen, ports: Ports, output: list[str]):
        self.process, self.ports, self.output = process, ports, output

    @property
    def http(self) -> str:
        return f"http://127.0.0.1:{self.ports.http}"

    @property
    def grpc(self) -> str:
        return f"127.0.0.1:{self.ports.grpc}"

    def metrics(self) -> dict[tuple[str, str], float]:
        """(metric, model) -> value of the stand-ins' cache gauges."""
        with urllib.request.urlopen(f"http://127.0.0.1:{self.ports.metrics}/metrics", timeout=10) as r:
            text = r.read().decode()
        values = {}
        for line in text.splitlines():
            if line.startswith("autojudge_kv_cached_"):
                name, rest = line.split("{", 1)
                model = rest.split('model="', 1)[1].split('"', 1)[0]
                values[(name, model)] = float(line.rsplit(" ", 1)[1])
        return values


def read_lines(stream, lines: list[str], ready: threading.Event) -> None:
    for line in stream:
        lines.append(line.rstrip("\n"))
        if "Ctrl-C stops the server" in line:
            ready.set()
    ready.set()  # the process ended


@pytest.fixture(scope="module")
def served(triton, tiny_checkpoints, tmp_path_factory):
    """`trtllm-autojudge serve` on the tiny pair, 2 BLS instances; stopped with SIGINT at the end,
    which must end it cleanly."""
    ports = Ports(free_port(), free_port(), free_port())
    p = tiny_checkpoints
    pair = p.pair()
    command = [sys.executable, "-m", "trtllm_autojudge.cli", "serve", "--target", pair.target, "--draft", pair.draft,
               "--draft-vocab", "none", "--judge", str(p.judge), "--task", pair.task, "--dtype", "float32",
               "--cpu-linear", "torch", "--threads", "1", "--bls-instances", "2",
               "--max-draft-tokens", str(MAX_DRAFT_TOKENS), "--http-port", str(ports.http),
               "--grpc-port", str(ports.grpc), "--metrics-port", str(ports.metrics),
               "--work-dir", str(tmp_path_factory.mktemp("serve")), "--startup-timeout", "170"]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines: list[str] = []
    ready = threading.Event()
    threading.Thread(target=read_lines, args=(process.stdout, lines, ready), daemon=True).start()
    ready.wait(180)
    if process.poll() is not None or not any("Ctrl-C stops the server" in line for line in lines):
        process.kill()
        pytest.fail("serve did not come up:\n" + "\n".join(lines[-40:]))
    served = Served(process, ports, lines)
    yield served
    process.send_signal(signal.SIGINT)
    assert process.wait(90) == 0, "\n".join(lines[-20:])
    assert any(line == "tritonserver stopped (status 0)" for line in lines), "\n".join(lines[-20:])
    assert not list(SHM_DIR.glob(f"autojudge_{process.pid}_*"))  # the Python backend's shared memory is gone


@pytest.fixture(scope="module")
def runtime(tiny_checkpoints):
    """The tiny pair as `trtllm-autojudge generate` loads it, and the judge."""
    task = load_task("gsm8k-program")
    target, draft, tokenizer = load_pair(tiny_checkpoints.pair().args(), task)
    return target, draft, tokenizer, task, JudgeHead.load(tiny_checkpoints.judge)


def in_process(runtime, question, threshold, depth, max_tokens):
    target, draft, tokenizer, task, head = runtime
    return speculative_generate(target, draft, task.prompt_ids(tokenizer, question), tree=DraftTree.chain(depth),
                                rule=JudgeRule(head, threshold) if threshold else None, max_new_tokens=max_tokens,
                                tokenizer=tokenizer)


def test_serve_prints_the_endpoints_and_every_model_is_ready(served):
    text = "\n".join(served.output)
    assert f"http://127.0.0.1:{served.ports.http}" in text and f"127.0.0.1:{served.ports.grpc}" in text
    assert f"/v2/models/{BLS}/generate -d '" in text  # the request to paste
    with httpclient.InferenceServerClient(f"127.0.0.1:{served.ports.http}") as client:
        assert all(client.is_model_ready(name) for name in CPU_MODELS)
        config = client.get_model_config(BLS)
        assert config["model_transaction_policy"]["decoupled"] is True
        assert {i["name"] for i in config["input"]} >= {"threshold", "num_draft_tokens", "max_tokens", "stream"}
    with urllib.request.urlopen(f"http://127.0.0.1:{served.ports.metrics}/metrics", timeout=10) as r:
        assert "nv_inference_request_success" in r.read().decode()  # Triton's own metrics stay on


@pytest.mark.parametrize("threshold", [0.0, 0.9])
def test_http_answers_equal_the_cpu_runtime(served, runtime, threshold):
    """Lossless and judged: the served tokens, text and per-cycle metrics are the runtime's."""
    want = in_process(runtime, QUESTION, threshold, 4, 40)
    got = ask_http(served.http, QUESTION, max_tokens=40, threshold=threshold, num_draft_tokens=4)
    assert got.tokens == want.tokens and got.text == want.text
    assert got.accepted_lengths == [c.accepted for c in want.cycles]
    assert got.judged_counts == [c.judged for c in want.cycles] and got.cycles == len(want.cycles)
    assert (sum(got.judged_counts) > 0) == (threshold > 0)


def test_grpc_streams_a_response_per_cycle(served, runtime):
    pieces = []
    got = ask_grpc(served.grpc, QUESTION, stream=True, on_response=pieces.append, max_tokens=30, threshold=0.9,
                   num_draft_tokens=3)
    want = in_process(runtime, QUESTION, 0.9, 3, 30)
    assert got.tokens == want.tokens and got.text == want.text
    assert got.responses >= got.cycles == len(want.cycles) > 1  # one per cycle (a last one may flush held text)
    assert [p["cycles"] for p in pieces][:got.cycles] == list(range(1, got.cycles + 1))
    whole = ask_grpc(served.grpc, QUESTION, stream=False, max_tokens=30, threshold=0.9, num_draft_tokens=3)
    assert whole.responses == 1 and whole.tokens == got.tokens and whole.accepted_lengths == got.accepted_lengths


BAD_REQUESTS = {  # name: (request values, what the error must say)
    "missing text_input": ({"max_tokens": 4}, "missing required input(s) ['text_input']"),
    "empty prompt": ({"text_input": "  ", "max_tokens": 4}, "text_input is empty"),
    "prompt longer than the context": ({"text_input": "x" * CONTEXT, "max_tokens": 4},
                                       f"the target's context holds {CONTEXT}"),
    "max_tokens 0": ({"text_input": QUESTION, "max_tokens": 0}, "max_tokens must be at least 1, got 0"),
    "max_tokens negative": ({"text_input": QUESTION, "max_tokens": -3}, "max_tokens must be at least 1, got -3"),
    "threshold negative": ({"text_input": QUESTION, "max_tokens": 4, "threshold": -0.5},
                           "threshold must lie in [0, 1] (0 = lossless, judge off), got -0.5"),
    "num_draft_tokens above the limit": ({"text_input": QUESTION, "max_tokens": 4, "num_draft_tokens": 99},
                                         f"num_draft_tokens must lie in 1..{MAX_DRAFT_TOKENS}"),
}


@pytest.mark.parametrize("name", sorted(BAD_REQUESTS))
def test_a_bad_request_gets_an_error_naming_the_input_and_the_next_is_served(served, name):
    values, message = BAD_REQUESTS[name]
    values = dict(values)
    question = values.pop("text_input", None)
    with pytest.raises(ServedError) as http_error:
        ask_http(served.http, question, **values) if question is not None else http_generate(served, values)
    assert message in str(http_error.value)
    if question is not None:  # gRPC says the same
        with pytest.raises(ServedError, match=re.escape(message)):
            ask_grpc(served.grpc, question, **values)
    assert len(ask_http(served.http, QUESTION, max_tokens=3).tokens) == 3


def http_generate(served, values: dict):
    """POST ``values`` as they are to the generate endpoint (ask_http always sends text_input)."""
    req = urllib.request.Request(f"{served.http}/v2/models/{BLS}/generate", data=json.dumps(values).encode())
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            return json.loads(r.read())
    except urllib.error.HTTPError as e:
        raise ServedError(json.loads(e.read())["error"]) from None


def stream_once(served, inputs) -> str:
    """Send ``inputs`` on a gRPC stream; the error message (the test expects one)."""
    errors: queue.Queue = queue.Queue()
    client = grpcclient.InferenceServerClient(served.grpc)
    try:
        client.start_stream(callback=lambda result, error: errors.put(error))
        client.async_stream_infer(BLS, inputs, enable_empty_final_response=True)
        error = errors.get(timeout=60)
    finally:
        client.stop_stream()
        client.close()
    assert error is not None
    return str(error)


def test_nan_threshold_a_wrong_dtype_and_a_missing_input_are_refused_by_name(served):
    """Through gRPC (JSON has no NaN; Triton's HTTP generate endpoint parses types before naming inputs)."""
    values = request_values(QUESTION, max_tokens=4)
    inputs = grpc_inputs({**values, "threshold": math.nan})
    assert "threshold must lie in [0, 1] (0 = lossless, judge off), got nan" in stream_once(served, inputs)
    wrong = grpc_inputs(values)
    wrong[1] = grpcclient.InferInput("max_tokens", [1], "FP32")
    wrong[1].set_data_from_numpy(np.asarray([4.0], np.float32))
    assert "inference input 'max_tokens' data-type is 'FP32', but model 'autojudge_bls' expects 'INT32'" in \
        stream_once(served, wrong)
    assert "'text_input'" in stream_once(served, grpc_inputs({"max_tokens": 4}))
    assert len(ask_grpc(served.grpc, QUESTION, max_tokens=3).tokens) == 3


def test_an_unknown_model_is_named(served):
    with pytest.raises(ServedError, match="HTTP 404: Request for unknown model: 'autojudge' is not found"):
        ask_http(served.http, QUESTION, max_tokens=3, model="autojudge")


def test_a_client_that_disconnects_mid_stream_frees_its_caches(served):
    """A stream closed after two cycles: the BLS stops the request at its next cycle and frees its KV
    caches in both stand-ins (their gauges fall back to zero), and the next request is served."""
    responses: queue.Queue = queue.Queue()
    client = grpcclient.InferenceServerClient(served.grpc)
    try:
        client.start_stream(callback=lambda result, error: responses.put((result, error)))
        client.async_stream_infer(BLS, grpc_inputs(request_values(QUESTION, max_tokens=200, num_draft_tokens=2,
                                                                  stream=True)))
        for _ in range(2):
            result, error = responses.get(timeout=60)
            assert error is None, str(error)
        held = served.metrics()
        assert all(held[("autojudge_kv_cached_requests", m)] == 1 and held[("autojudge_kv_cached_tokens", m)] > 0
                   for m in STAND_INS), held
    finally:
        client.stop_stream(cancel_requests=True)
        client.close()
    deadline = time.monotonic() + 60
    while any(served.metrics()[(g, m)] for g in ("autojudge_kv_cached_requests", "autojudge_kv_cached_tokens")
              for m in STAND_INS):
        assert time.monotonic() < deadline, served.metrics()
        time.sleep(0.2)
    assert len(ask_http(served.http, QUESTION, max_tokens=3).tokens) == 3
    assert all(served.metrics()[("autojudge_kv_cached_requests", m)] == 0 for m in STAND_INS)


def test_concurrent_requests_each_get_their_own_answer(served, runtime):
    """Four clients at once on two BLS instances: each answer is the one it gets alone."""
    questions = [QUESTION, "Bo reads 12 pages a day. How many in 5 days?", "What is 7 times 8?", "Sum 1 to 10."]
    answers: dict[int, list[int]] = {}

    def ask(i):
        answers[i] = ask_http(served.http, questions[i], max_tokens=24, threshold=0.9, num_draft_tokens=4).tokens

    threads = [threading.Thread(target=ask, args=(i,)) for i in range(len(questions))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert [answers[i] for i in range(len(questions))] == [in_process(runtime, q, 0.9, 4, 24).tokens
                                                           for q in questions]


def test_serve_refuses_a_busy_port_naming_the_flag(triton, capsys):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        busy = s.getsockname()[1]
        assert serve_cli.main(["--http-port", str(busy), "--grpc-port", str(free_port()),
                               "--metrics-port", str(free_port())]) == 2
    assert f"port {busy} on 127.0.0.1 is in use (--http-port): stop what holds it, or pick a free port with " \
           f"--http-port PORT" in capsys.readouterr().out


def test_serve_without_the_server_says_what_to_install(monkeypatch, capsys):
    import importlib.util

    find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "pytriton" else find_spec(name, *a))
    assert serve_cli.main([]) == 2
    out = capsys.readouterr().out
    assert "the Triton server is not installed in this environment" in out and "pip install -e '.[serve]'" in out


def descendants(pid: int) -> list[int]:
    """The pids of ``pid``'s process tree below it, read from /proc."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:  # the process ended while we looked
            continue
        children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def test_the_server_leaves_openmp_to_the_caller(served):
    """Each Python-backend stub sees the caller's OMP_WAIT_POLICY, none if none was set: a passive
    policy costs one client about a sixth of its speed, and the stand-ins share the cores among their
    requests instead (docs/serving.md, "Where the served time goes")."""
    policies = []
    for pid in descendants(served.process.pid):
        try:
            if b"triton_python_backend_stub" not in open(f"/proc/{pid}/cmdline", "rb").read():
                continue
            environ = open(f"/proc/{pid}/environ", "rb").read().split(b"\0")
        except OSError:
            continue
        policies.append(next((e.split(b"=", 1)[1].decode() for e in environ if e.startswith(b"OMP_WAIT_POLICY=")), None))
    assert len(policies) >= len(STAND_INS)
    assert set(policies) == {os.environ.get("OMP_WAIT_POLICY")}

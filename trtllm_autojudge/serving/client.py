"""Ask a served AutoJudge (``autojudge_bls``): over HTTP through Triton's ``generate`` endpoint (one
response), or over gRPC with tritonclient's stream API, one response per cycle with ``stream``.

    python -m trtllm_autojudge.serving.client "Tom has 3 apples..." --grpc 127.0.0.1:8001 --stream

The BLS of the CPU route is decoupled: Triton's HTTP ``infer`` endpoint and gRPC's unary ``infer``
refuse such a model, so HTTP asks through ``generate`` and gRPC through a stream.
"""
from __future__ import annotations

import argparse
import json
import queue
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field

import numpy as np

BLS = "autojudge_bls"


class ServedError(RuntimeError):
    """The server answered with an error (its message as given)."""


@dataclass
class Answer:
    text: str = ""
    tokens: list[int] = field(default_factory=list)
    accepted_lengths: list[int] = field(default_factory=list)  # one per cycle
    judged_counts: list[int] = field(default_factory=list)  # one per cycle
    cycles: int = 0
    responses: int = 0  # responses received: 1, or one per cycle when streamed
    seconds: float = 0.0  # request to last response
    first_response_s: float = 0.0

    def add(self, outputs: dict) -> None:
        """Fold in one response's outputs (a whole answer, or a streamed cycle's part)."""
        self.text += outputs["text_output"]
        self.tokens += outputs["output_ids"]
        self.accepted_lengths += outputs["accepted_lengths"]
        self.judged_counts += outputs["judged_counts"]
        self.cycles = outputs["cycles"]
        self.responses += 1


def request_values(question: str, max_tokens: int, threshold: float | None = None,
                   num_draft_tokens: int | None = None, stream: bool = False) -> dict:
    """The BLS's request inputs as plain values (absent: the repository's default)."""
    values = {"text_input": question, "max_tokens": max_tokens, "threshold": threshold,
              "num_draft_tokens": num_draft_tokens, "stream": stream or None}
    return {k: v for k, v in values.items() if v is not None}


def ask_http(http_url: str, question: str, timeout: float = 900.0, model: str = BLS, **settings) -> Answer:
    """One request through ``POST {http_url}/v2/models/{model}/generate`` (``settings``: :func:`request_values`)."""
    body = json.dumps(request_values(question, **settings)).encode()
    req = urllib.request.Request(f"{http_url}/v2/models/{model}/generate", data=body, headers={"Connection": "close"})
    start = time.perf_counter()
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            out = json.loads(r.read())
    except urllib.error.HTTPError as e:
        raise ServedError(f"HTTP {e.code}: {json.loads(e.read()).get('error')}") from None
    if "error" in out:
        raise ServedError(out["error"])
    answer = Answer()  # the generate endpoint writes a one-element output as a scalar
    answer.add({"text_output": out["text_output"], "cycles": int(np.ravel(out["cycles"])[0]),
                **{name: np.ravel(out[name]).astype(int).tolist() for name in ("output_ids", "accepted_lengths",
                                                                               "judged_counts")}})
    answer.seconds = answer.first_response_s = time.perf_counter() - start
    return answer


def grpc_inputs(values: dict) -> list:
    import tritonclient.grpc as grpcclient

    kinds = {"text_input": ("BYTES", np.object_), "max_tokens": ("INT32", np.int32), "threshold": ("FP32", np.float32),
             "num_draft_tokens": ("INT32", np.int32), "stream": ("BOOL", np.bool_)}
    inputs = []
    for name, value in values.items():
        kind, dtype = kinds[name]
        tensor = grpcclient.InferInput(name, [1], kind)
        tensor.set_data_from_numpy(np.asarray([value.encode() if kind == "BYTES" else value], dtype))
        inputs.append(tensor)
    return inputs


def result_outputs(result) -> dict:
    """A tritonclient result's BLS outputs as plain values."""
    text = result.as_numpy("text_output")
    return {"text_output": b"".join(text.reshape(-1)).decode("utf-8") if text is not None else "",
            **{name: result.as_numpy(name).reshape(-1).tolist() for name in ("output_ids", "accepted_lengths",
                                                                             "judged_counts")},
            "cycles": int(result.as_numpy("cycles").reshape(-1)[0])}


def ask_grpc(grpc_url: str, question: str, timeout: float = 900.0, on_response=None, model: str = BLS,
             **settings) -> Answer:
    """One request over a gRPC stream (``settings``: :func:`request_values`; with ``stream`` one
    response per cycle, each passed to ``on_response(outputs)`` as it arrives)."""
    import tritonclient.grpc as grpcclient

    responses: queue.Queue = queue.Queue()
    answer = Answer()
    client = grpcclient.InferenceServerClient(grpc_url)
    try:
        client.start_stream(callback=lambda result, error: responses.put((result, error)))
        start = time.perf_counter()
        client.async_stream_infer(model, grpc_inputs(request_values(question, **settings)),
                                  enable_empty_final_response=True)
        while True:
            result, error = responses.get(timeout=timeout)
            if error is not None:
                raise ServedError(str(error))
            final = result.get_response().parameters["triton_final_response"].bool_param
            if result.as_numpy("text_output") is not None:  # the empty final response carries no outputs
                outputs = result_outputs(result)
                answer.add(outputs)
                if answer.responses == 1:
                    answer.first_response_s = time.perf_counter() - start
                if on_response is not None:
                    on_response(outputs)
            if final:
                answer.seconds = time.perf_counter() - start
                return answer
    finally:
        client.stop_stream()
        client.close()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m trtllm_autojudge.serving.client", description=__doc__.split("\n\n")[0])
    p.add_argument("question")
    where = p.add_mutually_exclusive_group()
    where.add_argument("--http", default="http://127.0.0.1:8000", help="the server's HTTP URL (default)")
    where.add_argument("--grpc", help="the server's gRPC address, e.g. 127.0.0.1:8001")
    p.add_argument("--stream", action="store_true", help="gRPC: print each cycle's text as it arrives")
    p.add_argument("--max-tokens", type=int, default=256)
    p.add_argument("--threshold", type=float, default=None, help="0 = lossless (default: the judge's)")
    p.add_argument("--num-draft-tokens", type=int, default=None)
    args = p.parse_args(argv)
    settings = dict(max_tokens=args.max_tokens, threshold=args.threshold, num_draft_tokens=args.num_draft_tokens)
    if args.stream and not args.grpc:
        p.error("--stream needs --grpc: Triton's HTTP generate endpoint answers once")
    try:
        if args.grpc:
            show = (lambda out: print(out["text_output"], end="", flush=True)) if args.stream else None
            answer = ask_grpc(args.grpc, args.question, stream=args.stream, on_response=show, **settings)
        else:
            answer = ask_http(args.http, args.question, **settings)
    except (ServedError, OSError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    print("" if args.stream else answer.text)
    print(f"\n{len(answer.tokens)} tokens in {answer.cycles} cycles ({answer.seconds:.2f} s); accepted per cycle "
          f"{answer.accepted_lengths}, judged {sum(answer.judged_counts)}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())

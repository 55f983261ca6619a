"""Programs per second of the program checker's sandbox, against one fresh interpreter per program.

    python scripts/bench_program_checker.py --programs 300 --repeats 3

Runs generated training programs (each must give its gold answer) and, as the reference, the same
programs each in a new ``python -I`` process with the same rlimits (how the code checker used to
run code). Prints medians over repeats. The answer cache is off: every run executes.
"""
from __future__ import annotations

import argparse
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from trtllm_autojudge.data.programs import program_problems  # noqa: E402
from trtllm_autojudge.tasks.checkers import ProgramChecker  # noqa: E402


def fresh_interpreter(code: str, timeout_s: float) -> None:
    def limits():
        resource.setrlimit(resource.RLIMIT_CPU, (int(timeout_s) + 1,) * 2)
        resource.setrlimit(resource.RLIMIT_AS, (512 * 2**20,) * 2)

    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run([sys.executable, "-I", "-c", code], cwd=tmp, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL, preexec_fn=limits, start_new_session=True, timeout=timeout_s)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--programs", type=int, default=300)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--reference-programs", type=int, default=30, help="programs run with a fresh interpreter each")
    args = p.parse_args()
    problems = program_problems("train", max(1, args.programs // 70 + 1), seed=99)[: args.programs]
    checker = ProgramChecker(cache_size=0)
    checker.answer("answer = 0")  # start the worker outside the timing
    rates = []
    for _ in range(args.repeats):
        t0 = time.perf_counter()
        wrong = sum(checker.answer(pr.answer) != pr.gold for pr in problems)
        rates.append(len(problems) / (time.perf_counter() - t0))
        if wrong:
            raise SystemExit(f"{wrong} generated programs did not give their gold answer")
    ref = problems[: args.reference_programs]
    ref_rates = []
    for _ in range(args.repeats):
        t0 = time.perf_counter()
        for pr in ref:
            fresh_interpreter(pr.answer, checker.sandbox.timeout_s)
        ref_rates.append(len(ref) / (time.perf_counter() - t0))
    print(f"sandbox worker (fork per program): {statistics.median(rates):8.1f} programs/s  ({len(problems)} programs)")
    print(f"fresh python -I per program:       {statistics.median(ref_rates):8.1f} programs/s  ({len(ref)} programs)")
    print(f"(medians over {args.repeats} repeats; {len(problems)} of {len(problems)} gave their gold answer)")
    checker.sandbox.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())

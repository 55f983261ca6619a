"""Mine tiny prompts with the program checker; with --kill-at N, SIGKILL this process during the Nth program check."""
import argparse
import os
import signal
import sys
from pathlib import Path

sys.path[:0] = [str(Path(__file__).parent), str(Path(__file__).parents[1])]  # tests/ and this checkout

from program_text import decode_program, program_prompts  # noqa: E402
from tiny_models import tiny_pair  # noqa: E402
from trtllm_autojudge.mining.miner import LabelMiner, MiningConfig  # noqa: E402
from trtllm_autojudge.mining.run import mine_prompts  # noqa: E402
from trtllm_autojudge.tasks import Gsm8kProgramTask  # noqa: E402


class KillingChecker:
    """The program task's checker; kills the whole process while the Nth program runs in the sandbox."""

    def __init__(self, checker, kill_at, pid_file):
        self.checker, self.kill_at, self.pid_file, self.calls = checker, kill_at, pid_file, 0
        self.name = checker.name

    def answer(self, text, example=None):
        self.calls += 1
        if self.calls == self.kill_at:
            Path(self.pid_file).write_text(str(self.checker.sandbox._proc.pid))
            os.kill(os.getpid(), signal.SIGKILL)
        return self.checker.answer(text, example)

    def is_final(self, text):
        return self.checker.is_final(text)

    def same(self, a, b):
        return self.checker.same(a, b)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--out", required=True)
    p.add_argument("--kill-at", type=int, default=0)
    p.add_argument("--pid-file", default="")
    args = p.parse_args()
    target, draft = tiny_pair(seed=3)
    checker = KillingChecker(Gsm8kProgramTask().checker, args.kill_at, args.pid_file)
    miner = LabelMiner(target, draft, checker, decode_program, MiningConfig(max_new_tokens=16))
    stats = mine_prompts(miner, program_prompts(), args.out, progress=False)
    print(stats["prompts"], stats["labels"])


if __name__ == "__main__":
    main()

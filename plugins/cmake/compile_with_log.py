"""CUDA compiler launcher: run the compile command given as arguments, and keep its stderr (the
``-Xptxas -v`` report of that object) in ``<object>.ptxas.log`` as well as in the build output.
CMake passes it as ``CUDA_COMPILER_LAUNCHER``; the log is rewritten exactly when the object is.
"""
import subprocess
import sys
from pathlib import Path


def main(command: list[str]) -> int:
    if "-o" not in command:
        sys.exit("compile_with_log.py: the compile command has no '-o <object>': " + " ".join(command))
    obj = Path(command[command.index("-o") + 1])
    done = subprocess.run(command, stderr=subprocess.PIPE, text=True)
    sys.stderr.write(done.stderr)
    if done.returncode == 0:
        Path(f"{obj}.ptxas.log").write_text(done.stderr)
    return done.returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

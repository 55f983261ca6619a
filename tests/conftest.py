import os
import sys

sys.path.insert(0, os.path.dirname(__file__))  # tests/tiny_models.py

import torch  # noqa: E402

torch.set_num_threads(1)  # tiny models: one thread is fastest, and MPI tests run two processes

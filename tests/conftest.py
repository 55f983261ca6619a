import os
import sys

sys.path.insert(0, os.path.dirname(__file__))  # tests/tiny_models.py

import torch  # noqa: E402

torch.set_num_threads(min(2, os.cpu_count() or 1))

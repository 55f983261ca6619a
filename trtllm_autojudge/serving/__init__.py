"""Serving AutoJudge from a real Triton Inference Server on CPU (docs/serving.md).

:mod:`.install` finds the server that the ``serve`` extra installs (the ``nvidia-pytriton`` wheel
ships ``tritonserver`` with its Python backend) and lays out its backend folder for this
interpreter; :mod:`.server` starts, probes and stops one server; :mod:`.cli` is the ``serve`` verb.
"""

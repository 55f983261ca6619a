"""Insert the AutoJudgeAccept plugin into a TensorRT network (TensorRT 10, IPluginV3).

The calls follow TensorRT-LLM's own V3 plugin insertion (``tensorrt_llm/models/eagle/model.py``,
``eagle_prepare_drafter_inputs_plugin``): ``trt.get_plugin_registry().get_creator(name, version,
namespace)``, ``creator.create_plugin(name, PluginFieldCollection, trt.TensorRTPhase.BUILD)``,
``network.add_plugin_v3(inputs, shape_inputs, plugin)``. The argument building and checking is in
:mod:`.contract` (pure, tested on CPU); ``tensorrt`` is imported only when a function runs.
"""
from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np

from .contract import (ACCEPT_OUTPUTS, LAYER_NAME, PLUGIN_NAME, PLUGIN_NAMESPACE, PLUGIN_VERSION,
                       check_plugin_fields, check_plugin_input_shapes, plugin_field_specs, plugin_io_names)


def _tensorrt():
    try:
        import tensorrt as trt
    except ImportError as e:
        raise ImportError("the TensorRT Python package is not installed: the engine path needs a GPU host with "
                          "tensorrt-llm==1.2.* (which brings TensorRT 10); see docs/deploy.md") from e
    return trt


def add_autojudge_plugin(network, inputs: Sequence, fields: Mapping[str, np.ndarray]):
    """Add an ``AutoJudgeAccept`` layer in the mode the fields ask for; returns the ``IPluginV3Layer``.

    Parameters
    ----------
    network : tensorrt.INetworkDefinition
    inputs : sequence of tensorrt.ITensor
        In plugin order: :data:`.contract.ACCEPT_INPUTS` (accept mode) or
        :data:`.contract.LOGITS_INPUTS` (logits mode), as :func:`.contract.plugin_io_names` lists
        them: ``draft_hidden`` only when a block reads the draft, ``greedy_child`` (accept mode) only
        when one looks ahead.
    fields : dict
        All nine fields (:func:`.fields.engine_plugin_fields`).
    """
    trt = _tensorrt()
    fields = check_plugin_fields(fields)
    names, _ = plugin_io_names(fields)
    if len(inputs) != len(names):
        raise ValueError(f"these fields configure a plugin with {len(names)} inputs {list(names)}, got {len(inputs)}")
    check_plugin_input_shapes({n: tuple(t.shape) for n, t in zip(names, inputs)}, fields)
    creator = trt.get_plugin_registry().get_creator(PLUGIN_NAME, PLUGIN_VERSION, PLUGIN_NAMESPACE)
    if creator is None:
        raise RuntimeError(f"TensorRT has no creator {PLUGIN_NAME} v{PLUGIN_VERSION} in namespace {PLUGIN_NAMESPACE!r}: "
                           f"call trtllm_autojudge.trt.plugin.library.load_plugin_library() first")
    collection = trt.PluginFieldCollection(
        [trt.PluginField(name, data, getattr(trt.PluginFieldType, kind)) for name, data, kind in plugin_field_specs(fields)])
    plugin = creator.create_plugin(LAYER_NAME, collection, trt.TensorRTPhase.BUILD)
    if plugin is None:
        raise RuntimeError(f"{PLUGIN_NAME}.create_plugin refused the fields; TensorRT's error recorder says why")
    layer = network.add_plugin_v3(list(inputs), [], plugin)
    if layer is None:
        raise RuntimeError(f"network.add_plugin_v3 failed for {PLUGIN_NAME}; TensorRT's log says why")
    layer.name = LAYER_NAME
    return layer


def mark_accept_outputs(network, layer) -> list:
    """Name and mark the four accept-mode outputs of ``layer`` (plain TensorRT networks)."""
    outputs = []
    for i, name in enumerate(ACCEPT_OUTPUTS):
        t = layer.get_output(i)
        t.name = name
        network.mark_output(t)
        outputs.append(t)
    return outputs

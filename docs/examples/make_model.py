"""Writes model.onnx: y = relu(x @ W + b), the one-layer model of the tutorials."""

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

W = numpy_helper.from_array(np.linspace(-1, 1, 12, dtype=np.float32).reshape(4, 3), "W")
b = numpy_helper.from_array(np.array([0.1, -0.2, 0.3], dtype=np.float32), "b")
graph = helper.make_graph(
    [
        helper.make_node("MatMul", ["x", "W"], ["xw"]),
        helper.make_node("Add", ["xw", "b"], ["z"]),
        helper.make_node("Relu", ["z"], ["y"]),
    ],
    "layer",
    [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 4])],
    [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 3])],
    initializer=[W, b],
)
onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), "model.onnx")

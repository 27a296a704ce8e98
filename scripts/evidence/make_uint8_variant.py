#!/usr/bin/python3
"""Evidence (d): a uint8-activation (U8S8) variant of an int8 QOperator model, for timing
onnxruntime's uint8 kernels (its int8-activation conv is slow on AVX2 without VNNI).

Every int8 activation becomes uint8 holding the same real value: q_u8 = q_s8 + 128 with zero
point z + 128. Weights and their zero points stay int8. An int8 Relu (max(q, z)) becomes
Clip(q, min = z + 128). Handles the ops npukit quantize writes: QuantizeLinear, DequantizeLinear,
QLinearConv, QLinearAdd, QLinearGlobalAveragePool, QGemm, MaxPool, Relu, Flatten.
Usage: make_uint8_variant.py IN.int8.onnx OUT.uint8.onnx
"""
import sys

import numpy as np
import onnx
from onnx import helper, numpy_helper

# Input positions holding activation zero points, per op.
ACTIVATION_ZP = {
    "QuantizeLinear": [2], "DequantizeLinear": [2], "QLinearConv": [2, 7],
    "QLinearAdd": [2, 5, 7], "QLinearMul": [2, 5, 7], "QLinearGlobalAveragePool": [2, 4],
    "QLinearAveragePool": [2, 4], "QGemm": [2, 8], "QLinearMatMul": [2, 7],
    "QLinearSigmoid": [2, 4], "QLinearLeakyRelu": [2, 4],
}
PASS_THROUGH = {"MaxPool", "Flatten", "Reshape", "Relu"}


def main():
    src, dst = sys.argv[1], sys.argv[2]
    m = onnx.load(src)
    g = m.graph
    inits = {i.name: i for i in g.initializer}
    made = {}

    def u8_zero_point(name):
        if name not in made:
            z = numpy_helper.to_array(inits[name]).astype(np.int32)
            if inits[name].data_type != onnx.TensorProto.INT8:
                sys.exit(f"zero point '{name}' is not int8")
            made[name] = name + "_u8"
            g.initializer.append(numpy_helper.from_array((z + 128).astype(np.uint8), made[name]))
        return made[name]

    nodes = []
    for n in g.node:
        if n.op_type in ACTIVATION_ZP:
            for k in ACTIVATION_ZP[n.op_type]:
                if k < len(n.input) and n.input[k]:
                    n.input[k] = u8_zero_point(n.input[k])
        elif n.op_type == "Relu":
            # The int8 Relu npukit writes reads a tensor with zero point 0 (its producer's).
            zmin = n.name + "_min_u8"
            g.initializer.append(numpy_helper.from_array(np.array(128, dtype=np.uint8), zmin))
            n = helper.make_node("Clip", [n.input[0], zmin], list(n.output), name=n.name)
        elif n.op_type not in PASS_THROUGH and n.domain in ("", "ai.onnx"):
            sys.exit(f"node '{n.name}' ({n.op_type}) is not handled")
        nodes.append(n)
    del g.node[:]
    g.node.extend(nodes)
    used = {i for n in g.node for i in n.input}
    unused = [i for i in g.initializer if i.name not in used]
    for i in unused:
        g.initializer.remove(i)
    del g.value_info[:]  # intermediate types changed; let onnxruntime infer them
    onnx.checker.check_model(m)
    onnx.save(m, dst)
    print(f"wrote {dst}: {len(made)} zero points moved to uint8")


if __name__ == "__main__":
    main()

#!/usr/bin/python3
"""Builds single-op QOperator models with random data and records onnxruntime-node's outputs.

Offline only (needs node + bench/ort/node_modules): writes ref/testdata/ort/<case>.onnx,
<case>.in<i>.npy (graph inputs in order) and <case>.out0.npy (onnxruntime's output, graph
optimizations disabled). onnx/ref_conformance_test.cpp checks the reference executor against
them bit for bit.   Run: /usr/bin/python3 ref/testdata/make_ort_cases.py
"""
import json
import os
import subprocess

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, 'ort')
REPO = os.path.dirname(os.path.dirname(HERE))
rng = np.random.default_rng(20261123)

NP = {np.int8: TensorProto.INT8, np.uint8: TensorProto.UINT8, np.float32: TensorProto.FLOAT,
      np.int32: TensorProto.INT32}


def qrand(dtype, shape):
    info = np.iinfo(dtype)
    return rng.integers(info.min, info.max + 1, size=shape, dtype=np.int64).astype(dtype)


def const(name, value):
    return numpy_helper.from_array(np.asarray(value), name)


def make_case(name, op, domain, x, consts, attrs, out_dtype, out_shape=None):
    """x: (name, array) graph inputs; consts: (name, array) initializers; order[name]: node inputs."""
    node = helper.make_node(op, inputs=order[name], outputs=['y'], domain=domain, **attrs)
    if out_shape is None:  # symbolic, of the first input's rank (onnxruntime infers the rest)
        out_shape = [f'd{i}' for i in range(max(a.ndim for _, a in x))]
    graph = helper.make_graph(
        [node], name,
        [helper.make_tensor_value_info(n, NP[a.dtype.type], a.shape) for n, a in x],
        [helper.make_tensor_value_info('y', out_dtype, out_shape)],
        initializer=[const(n, v) for n, v in consts if v is not None])
    opsets = [helper.make_opsetid('', 13)]
    if domain == 'com.microsoft':
        opsets.append(helper.make_opsetid('com.microsoft', 1))
    model = helper.make_model(graph, opset_imports=opsets, producer_name='npukit-ref')
    model.ir_version = 7
    onnx.checker.check_model(model)
    path = os.path.join(OUT, name + '.onnx')
    onnx.save(model, path)
    feeds = []
    for i, (n, a) in enumerate(x):
        f = os.path.join(OUT, f'{name}.in{i}.npy')
        np.save(f, a)
        feeds.append(f'{n}={f}')
    tmp = os.path.join(OUT, '_tmp')
    os.makedirs(tmp, exist_ok=True)
    res = subprocess.run(['node', os.path.join(REPO, 'bench/ort/run.mjs'), path, *feeds, '--out', tmp],
                         capture_output=True, text=True)
    if res.returncode != 0:
        raise SystemExit(f'{name}: onnxruntime failed: {res.stderr}')
    os.replace(os.path.join(tmp, 'y.npy'), os.path.join(OUT, f'{name}.out0.npy'))
    os.rmdir(tmp)
    print(name, json.loads(res.stdout.strip().splitlines()[-1])['outputs'])


order = {}


def case(name, op, domain, inputs, attrs, out_dtype, out_shape=None):
    """inputs: ordered list of (name, array, is_graph_input); '' entries are (None, None, False)."""
    order[name] = [n if n is not None else '' for n, _, _ in inputs]
    x = [(n, a) for n, a, g in inputs if g]
    consts = [(n, a) for n, a, g in inputs if not g and n is not None]
    make_case(name, op, domain, x, consts, attrs, out_dtype, out_shape)


def f(v):
    return np.array(v, dtype=np.float32)


def main():
    os.makedirs(OUT, exist_ok=True)
    s8, u8 = np.int8, np.uint8
    # QLinearConv: int8 per-tensor, int8 per-channel weights, uint8 activations; strides, pads, groups
    for name, xt, per_channel, group, attrs in [
        ('qlinearconv_s8', s8, False, 1, {'pads': [1, 0, 2, 1], 'strides': [2, 2]}),
        ('qlinearconv_s8_perchannel', s8, True, 1, {'pads': [1, 1, 1, 1]}),
        ('qlinearconv_u8_depthwise', u8, False, 6, {'pads': [1, 1, 1, 1], 'strides': [1, 2]}),
    ]:
        cin, cout = 6, 6 if group > 1 else 5
        x = qrand(xt, (1, cin, 9, 11))
        w = qrand(s8, (cout, cin // group, 3, 3))
        ws = f(rng.uniform(0.002, 0.02, cout)) if per_channel else f(0.01)
        b = rng.integers(-3000, 3000, cout).astype(np.int32)
        xz = np.array(3 if xt == s8 else 128, dtype=xt)
        case(name, 'QLinearConv', '', [
            ('x', x, True), ('x_scale', f(0.05), False), ('x_zero_point', xz, False),
            ('w', w, False), ('w_scale', ws, False),
            ('w_zero_point', np.zeros(cout, s8) if per_channel else np.array(0, s8), False),
            ('y_scale', f(0.21), False), ('y_zero_point', np.array(-2 if xt == s8 else 120, dtype=xt), False),
            ('B', b, False)], dict(attrs, group=group), NP[xt])
    # QLinearMatMul (batched, int8) and QGemm (transB, alpha, C; int8 out and float out)
    a = qrand(s8, (2, 3, 17))
    case('qlinearmatmul_s8', 'QLinearMatMul', '', [
        ('a', a, True), ('a_scale', f(0.03), False), ('a_zero_point', np.array(1, s8), False),
        ('b', qrand(s8, (17, 7)), False), ('b_scale', f(0.02), False), ('b_zero_point', np.array(0, s8), False),
        ('y_scale', f(0.07), False), ('y_zero_point', np.array(4, s8), False)], {}, TensorProto.INT8)
    g = qrand(s8, (3, 40))
    for name, with_y in [('qgemm_s8', True), ('qgemm_s8_float_out', False)]:
        ins = [('A', g, True), ('a_scale', f(0.04), False), ('a_zero_point', np.array(-1, s8), False),
               ('B', qrand(s8, (10, 40)), False), ('b_scale', f(0.015), False),
               ('b_zero_point', np.array(0, s8), False),
               ('C', rng.integers(-500, 500, 10).astype(np.int32), False)]
        if with_y:
            ins += [('y_scale', f(0.09), False), ('y_zero_point', np.array(2, s8), False)]
        case(name, 'QGemm', 'com.microsoft', ins, {'transB': 1, 'alpha': 0.75},
             TensorProto.INT8 if with_y else TensorProto.FLOAT)
    # QLinearAdd / QLinearMul: same-shape, row broadcast, per-channel broadcast, scalar; int8 and uint8
    for op in ['QLinearAdd', 'QLinearMul']:
        for suffix, t, ashape, bshape in [('s8', s8, (1, 4, 5, 6), (1, 4, 1, 6)),
                                          ('s8_same', s8, (1, 4, 5, 6), (1, 4, 5, 6)),
                                          ('s8_channel', s8, (1, 4, 5, 6), (1, 4, 1, 1)),
                                          ('u8_scalar_a', u8, (1,), (1, 4, 5, 6))]:
            z = (lambda v: np.array(v, dtype=t)) if t == s8 else (lambda v: np.array(v + 128, dtype=t))
            case(f'{op.lower()}_{suffix}', op, 'com.microsoft', [
                ('A', qrand(t, ashape), True), ('A_scale', f(0.05), False), ('A_zero_point', z(3), False),
                ('B', qrand(t, bshape), True), ('B_scale', f(0.08), False), ('B_zero_point', z(-5), False),
                ('C_scale', f(0.11 if op == 'QLinearAdd' else 0.6), False), ('C_zero_point', z(1), False)],
                {}, NP[t])
    # Lookup-table ops
    x = qrand(s8, (1, 3, 7, 7))
    case('qlinearsigmoid_s8', 'QLinearSigmoid', 'com.microsoft', [
        ('X', x, True), ('X_scale', f(0.06), False), ('X_zero_point', np.array(2, s8), False),
        ('Y_scale', f(1 / 256), False), ('Y_zero_point', np.array(-128, s8), False)], {}, TensorProto.INT8)
    case('qlinearleakyrelu_s8', 'QLinearLeakyRelu', 'com.microsoft', [
        ('X', x, True), ('X_scale', f(0.06), False), ('X_zero_point', np.array(2, s8), False),
        ('Y_scale', f(0.045), False), ('Y_zero_point', np.array(-3, s8), False)], {'alpha': 0.1}, TensorProto.INT8)
    case('qlinearconcat_s8', 'QLinearConcat', 'com.microsoft', [
        ('Y_scale', f(0.05), False), ('Y_zero_point', np.array(0, s8), False),
        ('X0', qrand(s8, (1, 2, 4, 4)), True), ('X0_scale', f(0.05), False), ('X0_zero_point', np.array(0, s8), False),
        ('X1', qrand(s8, (1, 3, 4, 4)), True), ('X1_scale', f(0.037), False), ('X1_zero_point', np.array(6, s8), False)],
        {'axis': 1}, TensorProto.INT8)
    # Pools
    for name, attrs in [('qlinearavgpool_s8', {'kernel_shape': [3, 3], 'strides': [2, 2], 'pads': [1, 1, 1, 1]}),
                        ('qlinearavgpool_s8_include_pad', {'kernel_shape': [3, 3], 'strides': [2, 2],
                                                           'pads': [1, 1, 1, 1], 'count_include_pad': 1}),
                        ('qlinearavgpool_s8_ceil', {'kernel_shape': [2, 2], 'strides': [2, 2], 'ceil_mode': 1})]:
        case(name, 'QLinearAveragePool', 'com.microsoft', [
            ('X', qrand(s8, (1, 3, 7, 9)), True), ('x_scale', f(0.05), False), ('x_zero_point', np.array(1, s8), False),
            ('y_scale', f(0.04), False), ('y_zero_point', np.array(-1, s8), False)], attrs, TensorProto.INT8)
    case('qlinearglobalavgpool_s8', 'QLinearGlobalAveragePool', 'com.microsoft', [
        ('X', qrand(s8, (1, 4, 5, 7)), True), ('x_scale', f(0.05), False), ('x_zero_point', np.array(1, s8), False),
        ('y_scale', f(0.013), False), ('y_zero_point', np.array(-1, s8), False)], {}, TensorProto.INT8)
    # QuantizeLinear per-axis int8, DequantizeLinear per-axis
    case('quantizelinear_axis_s8', 'QuantizeLinear', '', [
        ('x', f(rng.normal(0, 3, (2, 3, 4))), True), ('y_scale', f([0.02, 0.05, 0.1]), False),
        ('y_zero_point', np.array([0, -3, 7], s8), False)], {'axis': 1}, TensorProto.INT8)
    case('dequantizelinear_axis_s8', 'DequantizeLinear', '', [
        ('x', qrand(s8, (2, 3, 4)), True), ('x_scale', f([0.02, 0.05, 0.1]), False),
        ('x_zero_point', np.array([0, -3, 7], s8), False)], {'axis': 1}, TensorProto.FLOAT)


if __name__ == '__main__':
    main()

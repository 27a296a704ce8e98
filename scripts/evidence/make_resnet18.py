#!/usr/bin/python3
"""Evidence (d): torchvision resnet18 with random weights (seed 0) as float ONNX (opset 13,
batch 1, 3x224x224), plus seeded calibration images and one test image, written to DIR
(default /tmp/npukit-evidence/resnet18). Too large (45 MB) to commit; this script is the source.
Usage: make_resnet18.py [DIR]
"""
import os
import sys

import numpy as np
import torch
import torchvision


def fold_identities(path):
    """Replaces Identity nodes that only rename an initializer by a copy of it: npukit quantize
    keeps a Conv in float when its weight or bias comes through such an Identity (reported as a
    quantizer issue in docs/evidence.md)."""
    import onnx
    m = onnx.load(path)
    inits = {i.name: i for i in m.graph.initializer}
    keep = []
    for n in m.graph.node:
        if n.op_type == "Identity" and n.input[0] in inits:
            t = onnx.TensorProto()
            t.CopyFrom(inits[n.input[0]])
            t.name = n.output[0]
            m.graph.initializer.append(t)
        else:
            keep.append(n)
    folded = len(m.graph.node) - len(keep)
    del m.graph.node[:]
    m.graph.node.extend(keep)
    onnx.save(m, path)
    print(f"folded {folded} Identity nodes of initializers")


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "/tmp/npukit-evidence/resnet18"
    os.makedirs(out, exist_ok=True)
    torch.manual_seed(0)
    model = torchvision.models.resnet18(weights=None)
    # Random batch-norm statistics too: with the defaults every folded conv bias is the same zero
    # vector, which torch.onnx deduplicates into Identity nodes (see fold_identities).
    for m in model.modules():
        if isinstance(m, torch.nn.BatchNorm2d):
            m.running_mean.uniform_(-0.2, 0.2)
            m.running_var.uniform_(0.5, 1.5)
            m.weight.data.uniform_(0.5, 1.5)
            m.bias.data.uniform_(-0.2, 0.2)
    model.eval()
    x = torch.randn(1, 3, 224, 224)
    torch.onnx.export(model, x, os.path.join(out, "resnet18.onnx"), opset_version=13,
                      input_names=["input"], output_names=["logits"], do_constant_folding=True)
    fold_identities(os.path.join(out, "resnet18.onnx"))
    rng = np.random.default_rng(0)
    np.save(os.path.join(out, "calib.npy"), rng.standard_normal((4, 3, 224, 224)).astype(np.float32))
    np.save(os.path.join(out, "image.npy"), rng.standard_normal((1, 3, 224, 224)).astype(np.float32))
    with torch.no_grad():
        np.save(os.path.join(out, "torch_logits.npy"),
                model(torch.from_numpy(np.load(os.path.join(out, "image.npy")))).numpy())
    print(f"wrote {out}/resnet18.onnx, calib.npy (4 images), image.npy")


if __name__ == "__main__":
    main()

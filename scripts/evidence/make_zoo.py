#!/usr/bin/python3
"""The torchvision model zoo the evidence and the closing notes measure on: every classification
architecture named in issues 11 and 12, with random weights (no pretrained weights can be had
here) whose batch-norm statistics are re-estimated on random images so that activations are
realistic, exported as float ONNX (opset 13, batch 1).

For each ARCH it writes OUT/ARCH/:
  float.onnx    the float model (Identity-of-initializer chains folded, see make_resnet18.py)
  calib.npy     16 calibration images, float32 [16, 3, H, W]
  test.npy      8 held-out images
  float_out.npy torch's logits for test.npy, the float reference
and OUT/README with the list. Too large to commit; this script is the source. Run offline with
/usr/bin/python3 (torch and torchvision from Debian); never in CI.

Usage: make_zoo.py [OUT] [ARCH ...]      (default OUT /work/zoo, every architecture)
"""
import os
import sys

import numpy as np
import torch
import torchvision

from make_resnet18 import fold_identities

# name -> constructor keyword arguments (weights=None is added); input side
ARCHS = {
    "resnet18": {},
    "resnet50": {},
    "mobilenet_v2": {},
    "mobilenet_v3_small": {},
    "mobilenet_v3_large": {},
    "efficientnet_b0": {},
    "regnet_x_400mf": {},
    "regnet_y_400mf": {},
    "shufflenet_v2_x1_0": {},
    "densenet121": {},
    "googlenet": {"aux_logits": False, "init_weights": True},
    "mnasnet1_0": {},
    "resnext50_32x4d": {},
    "squeezenet1_1": {},
    "vgg11": {},
    "alexnet": {},
}
SIDE = 224


def images(rng, n):
    """Smooth random images with the ImageNet normalisation's range: noise blurred by a box
    filter so neighbouring pixels correlate as in photographs, then standardised per channel."""
    x = rng.standard_normal((n, 3, SIDE + 6, SIDE + 6)).astype(np.float32)
    k = 7
    c = np.cumsum(np.cumsum(x, axis=2), axis=3)
    c = np.pad(c, ((0, 0), (0, 0), (1, 0), (1, 0)))
    box = (c[:, :, k:, k:] - c[:, :, :-k, k:] - c[:, :, k:, :-k] + c[:, :, :-k, :-k]) / (k * k)
    box = box[:, :, :SIDE, :SIDE]
    box = (box - box.mean(axis=(2, 3), keepdims=True)) / (box.std(axis=(2, 3), keepdims=True) + 1e-6)
    return box.astype(np.float32)


def reestimate_batchnorm(model, x):
    """Cumulative batch-norm statistics over x (momentum None), in chunks of 8."""
    for m in model.modules():
        if isinstance(m, torch.nn.modules.batchnorm._BatchNorm):
            m.reset_running_stats()
            m.momentum = None
    model.train()
    with torch.no_grad():
        for i in range(0, len(x), 8):
            model(torch.from_numpy(x[i:i + 8]))
    model.eval()


def make(arch, out):
    d = os.path.join(out, arch)
    os.makedirs(d, exist_ok=True)
    torch.manual_seed(0)
    rng = np.random.default_rng(0)
    model = getattr(torchvision.models, arch)(weights=None, **ARCHS[arch])
    reestimate_batchnorm(model, images(rng, 32))
    calib, test = images(rng, 16), images(rng, 8)
    path = os.path.join(d, "float.onnx")
    torch.onnx.export(model, torch.from_numpy(test[:1]), path, opset_version=13,
                      input_names=["input"], output_names=["logits"], do_constant_folding=True)
    fold_identities(path)
    np.save(os.path.join(d, "calib.npy"), calib)
    np.save(os.path.join(d, "test.npy"), test)
    with torch.no_grad():
        np.save(os.path.join(d, "float_out.npy"), model(torch.from_numpy(test)).numpy())
    print(f"{arch}: {os.path.getsize(path) / 1e6:.1f} MB", flush=True)


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "/work/zoo"
    archs = sys.argv[2:] or list(ARCHS)
    torch.set_num_threads(1)
    for arch in archs:
        make(arch, out)
    with open(os.path.join(out, "README"), "w") as f:
        f.write(__doc__ + "\nArchitectures: " + " ".join(sorted(
            a for a in ARCHS if os.path.exists(os.path.join(out, a, "float.onnx")))) + "\n")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Two models exported the way issue 18's were, for measuring the importer end to end.

- cls_mbv3_op9.onnx: a MobileNetV3-style classifier (conv/BN, hard-swish written out as
  x * clamp(x + 3, 0, 6) / 6, depthwise convs, squeeze-excite with hard-sigmoid, global pooling,
  x.view(x.size(0), -1) head) exported at opset 9 with symbolic height and width.
- det_db_op11.onnx: a DB-style text detector (conv backbone with stride-2 stages, ConvTranspose
  x2 upsampling head, sigmoid probability map) exported at opset 11 with symbolic height and width.

Random weights with batch-norm statistics re-estimated on the calibration images; writes
OUT/<model>.onnx, OUT/<model>.calib.npy (32 images) and OUT/<model>.test.npy (64 images).
Run offline: /usr/bin/python3 scripts/evidence/make_issue18_models.py OUT_DIR
"""
import os
import sys

import numpy as np
import torch
from torch import nn

from make_zoo import reestimate_batchnorm

torch.manual_seed(18)


def hswish(x):
    return x * torch.clamp(x + 3, 0, 6) / 6


class ConvBN(nn.Module):
    def __init__(self, cin, cout, k=3, s=1, groups=1, act="hs"):
        super().__init__()
        self.conv = nn.Conv2d(cin, cout, k, s, k // 2, groups=groups, bias=False)
        self.bn = nn.BatchNorm2d(cout)
        self.act = act

    def forward(self, x):
        x = self.bn(self.conv(x))
        if self.act == "hs":
            return hswish(x)
        if self.act == "relu":
            return torch.relu(x)
        return x


class SE(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.fc1 = nn.Conv2d(c, c // 4, 1)
        self.fc2 = nn.Conv2d(c // 4, c, 1)

    def forward(self, x):
        s = nn.functional.adaptive_avg_pool2d(x, 1)
        s = torch.relu(self.fc1(s))
        s = torch.clamp(self.fc2(s) + 3, 0, 6) / 6
        return x * s


class Block(nn.Module):
    def __init__(self, cin, cexp, cout, s, se):
        super().__init__()
        self.expand = ConvBN(cin, cexp, 1)
        self.dw = ConvBN(cexp, cexp, 3, s, groups=cexp)
        self.se = SE(cexp) if se else nn.Identity()
        self.project = ConvBN(cexp, cout, 1, act=None)
        self.residual = s == 1 and cin == cout

    def forward(self, x):
        y = self.project(self.se(self.dw(self.expand(x))))
        return x + y if self.residual else y


class Classifier(nn.Module):
    def __init__(self, classes=4):
        super().__init__()
        self.stem = ConvBN(3, 16, 3, 2)
        self.blocks = nn.Sequential(Block(16, 32, 16, 1, False), Block(16, 48, 24, 2, True),
                                    Block(24, 64, 24, 1, True), Block(24, 96, 40, 2, True))
        self.last = ConvBN(40, 96, 1)
        self.fc = nn.Linear(96, classes)

    def forward(self, x):
        x = self.last(self.blocks(self.stem(x)))
        x = nn.functional.adaptive_avg_pool2d(x, 1)
        x = x.view(x.size(0), -1)
        return torch.softmax(self.fc(x), dim=1)


class Detector(nn.Module):
    def __init__(self):
        super().__init__()
        self.s1 = nn.Sequential(ConvBN(3, 16, 3, 2, act="relu"), ConvBN(16, 16, 3, 1, act="relu"))
        self.s2 = nn.Sequential(ConvBN(16, 32, 3, 2, act="relu"), ConvBN(32, 32, 3, 1, act="relu"))
        self.s3 = nn.Sequential(ConvBN(32, 64, 3, 2, act="relu"), ConvBN(64, 64, 3, 1, act="relu"))
        self.head = nn.Sequential(
            ConvBN(64, 16, 3, 1, act="relu"),
            nn.ConvTranspose2d(16, 16, 2, 2), nn.BatchNorm2d(16), nn.ReLU(),
            nn.ConvTranspose2d(16, 1, 2, 2))

    def forward(self, x):
        return torch.sigmoid(self.head(self.s3(self.s2(self.s1(x)))))


def images(n, h, w, rng):
    # Smooth random images with text-like horizontal strokes, in [0, 1].
    x = rng.uniform(0, 1, (n, 3, h // 4, w // 4)).astype(np.float32)
    x = torch.nn.functional.interpolate(torch.from_numpy(x), size=(h, w), mode="bilinear",
                                        align_corners=False).numpy()
    for i in range(n):
        for _ in range(rng.integers(1, 4)):
            r = rng.integers(0, h - 4)
            c0 = rng.integers(0, w // 2)
            x[i, :, r:r + 3, c0:c0 + rng.integers(8, w // 2)] = rng.uniform(0, 0.2)
    return x


def export(model, name, opset, h, w, out, rng):
    data = images(96, h, w, rng)
    reestimate_batchnorm(model, data)
    path = os.path.join(out, name + ".onnx")
    torch.onnx.export(model, torch.from_numpy(data[:1]), path, opset_version=opset,
                      input_names=["x"], output_names=["y"],
                      dynamic_axes={"x": {0: "N", 2: "H", 3: "W"}, "y": {0: "N"}})
    np.save(os.path.join(out, name + ".calib.npy"), data[:32])
    np.save(os.path.join(out, name + ".test.npy"), data[32:])
    print("wrote", path)


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "."
    os.makedirs(out, exist_ok=True)
    rng = np.random.default_rng(18)
    export(Classifier(), "cls_mbv3_op9", 9, 48, 160, out, rng)
    export(Detector(), "det_db_op11", 11, 96, 96, out, rng)


if __name__ == "__main__":
    main()

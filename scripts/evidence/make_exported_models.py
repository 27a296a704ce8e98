#!/usr/bin/env python3
"""More models exported the way users bring them (issue 18), for measure_exported.py.

- unet_convt_op11: a small U-Net (conv/BN/ReLU encoder with max pools, ConvTranspose k2 s2
  decoder with skip concatenations, 3-class logits), opset 11, symbolic batch, height and width.
- fpn_upsample_op9: a detector neck (stride-2 conv stages, nn.Upsample(scale_factor=2, nearest)
  top-down path with additions, sigmoid map), opset 9 (the Upsample op), symbolic H and W.
- mobilenet_v2_op7: torchvision mobilenet_v2 (ReLU6 = Clip with attributes, Dropout with ratio),
  opset 7, symbolic batch.
- lraspp_mbv3_op13: torchvision's LR-ASPP MobileNetV3-Large segmentation model (hard-swish,
  squeeze-excite, bilinear interpolation to sizes computed from Shape), opset 13, symbolic
  batch, height and width.
- fpn_resnet18_op11: torchvision's resnet_fpn_backbone('resnet18') (detection backbone: FPN with
  nearest interpolation to the lateral's Shape, a LastLevelMaxPool), outputs the five maps,
  opset 11, symbolic H and W.

Random weights, batch-norm statistics re-estimated on the calibration images (as make_zoo.py
does). Writes OUT/<model>.onnx, .calib.npy (16 images) and .test.npy (16 images).
Offline only: /usr/bin/python3 scripts/evidence/make_exported_models.py OUT [MODEL ...]
"""
import os
import sys

import numpy as np
import torch
import torchvision
from torch import nn

from make_zoo import reestimate_batchnorm

torch.manual_seed(18)


def cbr(cin, cout, s=1):
    return nn.Sequential(nn.Conv2d(cin, cout, 3, s, 1, bias=False), nn.BatchNorm2d(cout),
                         nn.ReLU(inplace=True))


class UNet(nn.Module):
    def __init__(self, classes=3):
        super().__init__()
        self.e1 = nn.Sequential(cbr(3, 16), cbr(16, 16))
        self.e2 = nn.Sequential(cbr(16, 32), cbr(32, 32))
        self.e3 = nn.Sequential(cbr(32, 64), cbr(64, 64))
        self.pool = nn.MaxPool2d(2)
        self.up2 = nn.ConvTranspose2d(64, 32, 2, 2)
        self.d2 = nn.Sequential(cbr(64, 32), cbr(32, 32))
        self.up1 = nn.ConvTranspose2d(32, 16, 2, 2)
        self.d1 = nn.Sequential(cbr(32, 16), cbr(16, 16))
        self.out = nn.Conv2d(16, classes, 1)

    def forward(self, x):
        a = self.e1(x)
        b = self.e2(self.pool(a))
        c = self.e3(self.pool(b))
        y = self.d2(torch.cat([self.up2(c), b], 1))
        y = self.d1(torch.cat([self.up1(y), a], 1))
        return self.out(y)


class FpnNeck(nn.Module):
    def __init__(self):
        super().__init__()
        self.s1 = nn.Sequential(cbr(3, 16, 2), cbr(16, 16))
        self.s2 = nn.Sequential(cbr(16, 32, 2), cbr(32, 32))
        self.s3 = nn.Sequential(cbr(32, 64, 2), cbr(64, 64))
        self.l1, self.l2, self.l3 = nn.Conv2d(16, 32, 1), nn.Conv2d(32, 32, 1), nn.Conv2d(64, 32, 1)
        self.up = nn.Upsample(scale_factor=2, mode="nearest")
        self.head = nn.Sequential(cbr(32, 16), nn.Conv2d(16, 1, 1))

    def forward(self, x):
        a = self.s1(x)
        b = self.s2(a)
        c = self.s3(b)
        p = self.l2(b) + self.up(self.l3(c))
        p = self.l1(a) + self.up(p)
        return torch.sigmoid(self.head(p))


class FpnBackbone(nn.Module):
    def __init__(self):
        super().__init__()
        from torchvision.models.detection.backbone_utils import resnet_fpn_backbone
        self.body = resnet_fpn_backbone(backbone_name="resnet18", weights=None,
                                        trainable_layers=5)

    def forward(self, x):
        return tuple(self.body(x).values())


class Lraspp(nn.Module):
    def __init__(self):
        super().__init__()
        self.m = torchvision.models.segmentation.lraspp_mobilenet_v3_large(
            weights=None, weights_backbone=None, num_classes=4)

    def forward(self, x):
        return self.m(x)["out"]


def images(n, h, w, rng):
    x = rng.uniform(0, 1, (n, 3, h // 8, w // 8)).astype(np.float32)
    x = torch.nn.functional.interpolate(torch.from_numpy(x), size=(h, w), mode="bilinear",
                                        align_corners=False).numpy()
    x += rng.normal(0, 0.05, x.shape).astype(np.float32)
    return ((x - 0.45) / 0.25).astype(np.float32)


MODELS = {
    # name: (constructor, opset, H, W, dynamic axes of x, output names)
    "unet_convt_op11": (UNet, 11, 64, 64, {0: "N", 2: "H", 3: "W"}, ["y"]),
    "fpn_upsample_op9": (FpnNeck, 9, 64, 96, {2: "H", 3: "W"}, ["y"]),
    "mobilenet_v2_op7": (lambda: torchvision.models.mobilenet_v2(num_classes=10), 7, 96, 96,
                         {0: "N"}, ["y"]),
    "lraspp_mbv3_op13": (Lraspp, 13, 96, 96, {0: "N", 2: "H", 3: "W"}, ["y"]),
    "fpn_resnet18_op11": (FpnBackbone, 11, 96, 96, {2: "H", 3: "W"},
                          ["p0", "p1", "p2", "p3", "pool"]),
}


def export(name, out, rng):
    ctor, opset, h, w, axes, outputs = MODELS[name]
    model = ctor()
    data = images(64, h, w, rng)
    reestimate_batchnorm(model, data[:48])
    path = os.path.join(out, name + ".onnx")
    dyn = {"x": axes}
    torch.onnx.export(model, torch.from_numpy(data[:1]), path, opset_version=opset,
                      input_names=["x"], output_names=outputs, dynamic_axes=dyn)
    np.save(os.path.join(out, name + ".calib.npy"), data[:16])
    np.save(os.path.join(out, name + ".test.npy"), data[48:64])
    print("wrote", path)


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "."
    os.makedirs(out, exist_ok=True)
    names = sys.argv[2:] or list(MODELS)
    for name in names:
        export(name, out, np.random.default_rng(18))


if __name__ == "__main__":
    main()

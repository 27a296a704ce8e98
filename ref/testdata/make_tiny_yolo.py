#!/usr/bin/python3
"""A tiny YOLO-style float model (conv+BN+LeakyReLU, maxpools incl. the stride-1 padded one,
nearest upsample, concat, two heads decoded with sigmoid/exp, softmax), exported with torch at
opset 13, plus one input and torch's outputs: ref/testdata/models/tiny_yolo.*.
Offline only.   Run: /usr/bin/python3 ref/testdata/make_tiny_yolo.py
"""
import os

import numpy as np
import torch
import torch.nn as nn

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'models')


class TinyYolo(nn.Module):
    def __init__(self):
        super().__init__()
        def block(i, o, k=3):
            return nn.Sequential(nn.Conv2d(i, o, k, 1, k // 2, bias=False), nn.BatchNorm2d(o), nn.LeakyReLU(0.1))
        self.b1, self.p1 = block(3, 16), nn.MaxPool2d(2, 2)
        self.b2, self.p2 = block(16, 32), nn.MaxPool2d(2, 2)
        self.b3, self.pad, self.p3 = block(32, 64), nn.ZeroPad2d((0, 1, 0, 1)), nn.MaxPool2d(2, 1)
        self.b4, self.up = block(64, 32, 1), nn.Upsample(scale_factor=2, mode='nearest')
        self.head1, self.head2 = nn.Conv2d(64, 3 * 7, 1), nn.Conv2d(64, 3 * 7, 1)

    def forward(self, x):
        x = self.p1(self.b1(x))
        r = self.b2(x)
        x = self.p3(self.pad(self.b3(self.p2(r))))
        u = torch.cat([self.up(self.b4(x)), r[:, :32]], 1)
        o1, o2 = self.head1(x), self.head2(u)
        o1 = o1.view(1, 3, 7, o1.shape[2], o1.shape[3]).permute(0, 1, 3, 4, 2)
        o2 = o2.view(1, 3, 7, o2.shape[2], o2.shape[3]).permute(0, 1, 3, 4, 2)
        xy, wh, rest = torch.sigmoid(o1[..., 0:2]) * 2 - 0.5, torch.exp(o1[..., 2:4]), torch.sigmoid(o1[..., 4:])
        return torch.cat([xy, wh, rest], -1).reshape(1, -1, 7), torch.sigmoid(o2).reshape(1, -1, 7).softmax(-1)


def main():
    torch.manual_seed(0)
    m = TinyYolo().eval()
    for mod in m.modules():
        if isinstance(mod, nn.BatchNorm2d):
            mod.running_mean.uniform_(-0.5, 0.5)
            mod.running_var.uniform_(0.5, 2)
    x = torch.randn(1, 3, 64, 80)
    os.makedirs(OUT, exist_ok=True)
    torch.onnx.export(m, x, os.path.join(OUT, 'tiny_yolo.onnx'), opset_version=13,
                      input_names=['x'], output_names=['a', 'b'])
    with torch.no_grad():
        a, b = m(x)
    np.save(os.path.join(OUT, 'tiny_yolo.input_0.npy'), x.numpy())
    np.save(os.path.join(OUT, 'tiny_yolo.output_0_0.npy'), a.numpy())
    np.save(os.path.join(OUT, 'tiny_yolo.output_0_1.npy'), b.numpy())


if __name__ == '__main__':
    main()

#!/usr/bin/env python3
"""Writes the libFuzzer seeds in fixtures/fuzz/<target>/ from the spec's wire formats (run from
the repo root after examples/conv_relu_9x8x8.gml exists)."""
import re
import struct


def dwp(addr, payload):
    return struct.pack(">III", 0xFFFFFFFF, len(payload), addr) + payload


START = struct.pack(">III", 0xFFFFFFFF, 0, 0)
gml = open("examples/conv_relu_9x8x8.gml", "rb").read()
stream = gml + dwp(768, bytes((i * 7) & 0xFF for i in range(512))) + START
for d in ["dwp_fuzz", "gml_fuzz"]:
    open(f"fixtures/fuzz/{d}/conv_relu_9x8x8.gml", "wb").write(gml)
    open(f"fixtures/fuzz/{d}/conv_relu_9x8x8_run.dwp", "wb").write(stream)
hexes = re.findall(r'^    "([0-9a-f]{64})",', open("isa/hand_vectors.inc").read(), re.M)
n = len(hexes)
zeroth = bytes(24) + struct.pack(">II", (n + 1) * 32, 32)
every = dwp(0, zeroth + b"".join(bytes.fromhex(h) for h in hexes)) + dwp((n + 1) * 32, bytes(range(32))) + START
for d in ["dwp_fuzz", "gml_fuzz"]:
    open(f"fixtures/fuzz/{d}/every_opcode.dwp", "wb").write(every)
open("fixtures/fuzz/dwp_fuzz/start_only.dwp", "wb").write(START)


def frame(i, p):
    return struct.pack(">III", 0xFFFFFFFF, len(p), i) + p + struct.pack(">III", 0xFFFFFFFF, 0, 0)


open("fixtures/fuzz/dispatch_fuzz/two_frames.bin", "wb").write(frame(0x42, bytes(range(64))) + frame(0xBEEF, b""))
open("fixtures/fuzz/dispatch_fuzz/conv_output_512.bin", "wb").write(frame(0x42, bytes((i * 3) & 0xFF for i in range(512))))
w48 = lambda v: v.to_bytes(6, "big")
S = 0xFFFFFFFFFFFF
meta = w48(S) + w48(0) + w48(0) + w48(S) + w48(6) + w48(1) + w48(1) + w48(S) + w48(6) + w48(2) + w48(len(stream))
open("fixtures/fuzz/dispatch_fuzz/meta_reset_dispatch_size.bin", "wb").write(meta)

"""XS3 / lib_nn int8 kernels with the XS3 vector unit's exact saturation and rounding."""
import numpy as np

from . import _npukit


def pack_bso(bias, shift1, scale, offset_scale, offset, shift2):
    """The Bias-Scale-Offset tensor (uint16, lib_nn generation B layout) for per-channel arrays."""
    channels = [(int(b), int(s1), int(sc), int(os_), int(o), int(s2))
                for b, s1, sc, os_, o, s2 in zip(bias, shift1, scale, offset_scale, offset, shift2)]
    return _npukit.xs3.pack_bso(channels)


def conv2d(x, k, bso, out_hw, start=(0, 0), stride=(1, 1), zero_point=0, symmetric=False,
           impl="auto"):
    """lib_nn conv2d_deep: x int8 [H, W, C_in], k int8 [C_out, K_h, K_w, C_in], bso from
    pack_bso() (or a packed uint16 array). Output (r, c) reads the window at
    start + (r * stride_v, c * stride_h); a negative start is implied padding of value
    zero_point. Returns int8 [H', W', C_out] for out_hw = (H', W'); impl "scalar" forces the
    reference kernel instead of the AVX2 one."""
    if impl not in ("auto", "scalar"):
        raise ValueError("impl is 'auto' or 'scalar'")
    return _npukit.xs3.conv2d(np.ascontiguousarray(x, dtype=np.int8),
                              np.ascontiguousarray(k, dtype=np.int8),
                              np.ascontiguousarray(bso, dtype=np.uint16), tuple(start),
                              tuple(stride), tuple(out_hw), int(zero_point), bool(symmetric),
                              impl == "scalar")

"""NVDLA SDP/CDP hybrid LUT designer (npukit lut design): programs the two-level LUT for a
function and measures its error on the register-exact model."""
from . import _npukit


def functions():
    """[(name, formula)] of the functions the designer knows."""
    return _npukit.lut.functions()


def design(function, unit="sdp", precision="int", lo=None, hi=None, in_scale=None,
           out_scale=None):
    """Designs a LUT for `function` on `unit` (sdp, cdp) and `precision` (int, int8, int16,
    fp16) over [lo, hi]. Returns a dict: structure, error (max_abs, mean_abs, max_ulp,
    mean_ulp, worst_x, samples), le and lo_table (the raw tables), registers [(name, value)],
    case_json, c_header and svg."""
    return _npukit.lut.design(function, unit, precision, lo, hi, in_scale, out_scale)

#!/usr/bin/env python3
"""Fits the constants of the Gati timing model (device/timing.h) to the RTL's own cycle counts.

  scripts/fit_timing.py [--npukit build/tools/npukit] [--data DIR ...] [--write]

For every recorded program (DIR/<case>/{stream.bin,expected.json}; default: the committed copy
fixtures/rtl_timing of ../shared/rtl-calibration and ../shared/rtl-blocks) it runs `npukit sim --stats-json` and
reads each layer's structural counts ("timing_terms": passes, streamed elements, DRAM-bound
cycles, ...). The model is cycles = run_start + sum over layers of dot(terms, constants), linear in
the constants, so they are found by least squares on the relative error (each program weighted by
1/rtl_cycles), with the constants that no recording exercises left at their hardware defaults.
--write regenerates device/timing_table.inc (the one table of constants); rebuild afterwards.
Needs python3 with numpy (offline only; CI never runs this)."""
import glob, json, os, subprocess, sys, tempfile

import numpy as np

root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
args = sys.argv[1:]
npukit = os.path.join(root, 'build', 'tools', 'npukit')
if '--npukit' in args:
    npukit = args[args.index('--npukit') + 1]
data = [args[i + 1] for i, a in enumerate(args) if a == '--data']
if not data:
    data = [os.path.join(root, 'fixtures', 'rtl_timing')]

# Term order and the default (unfitted) value and source of each, as in timing.h.
TERMS = [
    ('run_start', 'soft start, zeroth instruction and first instruction burst (14.14 prefetch)'),
    ('layer', 'START broadcast, acknowledgements, instruction prefetch per layer'),
    ('conv_pass', 'per serialised pass: image re-request, array fill/drain, tail (14.14)'),
    ('conv_write_pass', 'extra cost of a pass that writes output (14.14)'),
    ('conv_stream', 'im2col: cycles per streamed padded-image element'),
    ('weight_beat', 'weight load per 32-byte beat of a pass block (14.14)'),
    ('output_beat', 'output writer per 32-byte beat not hidden by the stream'),
    ('dram_bound', 'OnChipAcc=0: per cycle of DRAM traffic above the stream (14.14)'),
    ('pool_group', 'max pool: per channel group pass (14.14 pool streaming)'),
    ('pool_stream', 'max pool: per streamed padded-input element'),
    ('block_group', 'EltWise/RESIZE: per channel group pass'),
    ('eltwise_stream', 'EltWise/activation: per streamed pixel of a channel group'),
    ('fc_stream', 'FC: per input row and block of 32 outputs'),
    ('resize_stream', 'RESIZE: per output pixel of a channel group'),
    ('other_stream', 'TRANSPOSE/RESHAPE/CONCAT/NMS: per 32-byte beat moved'),
    ('dispatch_frame', 'dispatcher: per frame (3-word header, footer, START wait; 14.14)'),
    ('dispatch_beat', 'dispatcher: per 32-byte beat (wait, 8 words, handshake; 14.14)'),
]
# Not recorded on the RTL: one beat per cycle (the DRAM port's rate), not fitted.
DEFAULTS = {'other_stream': 1.0}


def programs():
    for d in data:
        for exp in sorted(glob.glob(os.path.join(d, '*', 'expected.json'))):
            e = json.load(open(exp))
            name = os.path.basename(os.path.dirname(exp))
            if not e.get('rtl_cycles') or '_cat' in name:  # CONCAT never completes (14.15)
                continue
            yield os.path.dirname(exp), name, e


rows, ys, names, sets = [], [], [], []
with tempfile.TemporaryDirectory() as tmp:
    for d, name, e in programs():
        st = os.path.join(tmp, 'stats.json')
        cmd = [npukit, 'sim', os.path.join(d, 'stream.bin'), '--sa-arch', e['sa_arch'],
               '--stats-json', st]
        p = subprocess.run(cmd, capture_output=True, text=True)
        if p.returncode != 0:
            sys.exit(f'{name}: npukit sim failed: {p.stderr.strip()[-300:]}')
        s = json.load(open(st))
        f = np.zeros(len(TERMS))
        f[0] = 1
        for layer in s['layers']:
            for i, (t, _) in enumerate(TERMS):
                f[i] += layer['timing_terms'].get(t, 0.0)
        rows.append(f); ys.append(e['rtl_cycles']); names.append(name); sets.append(e.get('set', ''))

A = np.array(rows); y = np.array(ys, float)
fixed = {TERMS.index(next(t for t in TERMS if t[0] == k)): v for k, v in DEFAULTS.items()}
free = [i for i in range(len(TERMS)) if i not in fixed and A[:, i].any()]
unused = [i for i in range(len(TERMS)) if i not in fixed and not A[:, i].any()]
rhs = y - sum(A[:, i] * v for i, v in fixed.items())
# The calibration set is the contract (every program within 5 %, median <= 2 %): weighted
# CALIB_WEIGHT times a block recording.
CALIB_WEIGHT = float(os.environ.get('CALIB_WEIGHT', '2'))
w = np.array([CALIB_WEIGHT if st == 'rtl-calibration' else 1.0 for st in sets]) / y
x, *_ = np.linalg.lstsq(A[:, free] * w[:, None], rhs * w, rcond=None)
const = np.zeros(len(TERMS))
for i, v in fixed.items():
    const[i] = v
for i, v in zip(free, x):
    const[i] = v
pred = A @ const
err = (pred - y) / y
for n, yy, pp, ee in sorted(zip(names, y, pred, err), key=lambda t: -abs(t[3])):
    print(f'{n:32s} rtl {yy:8.0f}  model {pp:9.1f}  {ee * 100:+6.2f} %')
for label, sel in (('all', [True] * len(y)), ('rtl-calibration', [st == 'rtl-calibration' for st in sets]),
                   ('rtl-blocks', [st == 'rtl-blocks' for st in sets])):
    e_ = abs(err[np.array(sel)])
    if len(e_):
        print(f'{label}: {len(e_)} programs, max {e_.max() * 100:.2f} %, median {np.median(e_) * 100:.2f} %, '
              f'within 5 %: {(e_ <= 0.05).sum()}')
for i, (t, _) in enumerate(TERMS):
    print(f'  {t:16s} {const[i]:10.4f}  {"fixed" if i in fixed else "unused" if i in unused else "fit"}')

if '--write' in args:
    out = os.path.join(root, 'device', 'timing_table.inc')
    n = len(y)
    with open(out, 'w') as fh:
        fh.write('// Generated by scripts/fit_timing.py --write: do not edit by hand; rerun it.\n')
        c = abs(err[np.array([st == 'rtl-calibration' for st in sets])])
        fh.write(f'// Fitted on {n} RTL-recorded programs (rtl-calibration weighted {CALIB_WEIGHT:g}x, '
                 f'rtl-blocks): calibration max {c.max() * 100:.2f} % median {np.median(c) * 100:.2f} %; '
                 f'all max {abs(err).max() * 100:.2f} % median {np.median(abs(err)) * 100:.2f} %.\n')
        fh.write('// {name, cycles per unit of the term, where the value comes from}\n')
        for i, (t, what) in enumerate(TERMS):
            if i in fixed:
                src = f'not recorded on the RTL: assumed; {what}'
            elif i in unused:
                src = f'not exercised by any recording: 0; {what}'
            else:
                src = f'least-squares fit to rtl_cycles; {what}'
            fh.write(f'{{"{t}", {const[i]:.4f}, "{src}"}},\n')
    print('wrote', out)

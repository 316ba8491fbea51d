"""The error function for NumPy arrays: FreeBSD msun's ``s_erf.c`` (fdlibm), vectorised.

NumPy has no erf and burnish does not depend on SciPy. This follows fdlibm's algorithm region
by region, with its coefficients, so float64 results are within an ulp or so of ``math.erf``.

The coefficients are from fdlibm, whose notice asks to be kept:

    Copyright (C) 1993 by Sun Microsystems, Inc. All rights reserved.

    Developed at SunPro, a Sun Microsystems, Inc. business.
    Permission to use, copy, modify, and distribute this
    software is freely granted, provided that this notice
    is preserved.
"""

from __future__ import annotations

import struct

import numpy as np

ERX = 8.45062911510467529297e-01  # erf(1) rounded to single precision
EFX = 1.28379167095512586316e-01  # 2/sqrt(pi) - 1
EFX8 = 1.02703333676410069053e00  # 8 * EFX

# erf(x) = x + x * P(x^2) / Q(x^2) on [0, 0.84375]
PP = (1.28379167095512558561e-01, -3.25042107247001499370e-01, -2.84817495755985104766e-02,
      -5.77027029648944159157e-03, -2.37630166566501626084e-05)
QQ = (1.0, 3.97917223959155352819e-01, 6.50222499887672944485e-02, 5.08130628187576562776e-03,
      1.32494738004321644526e-04, -3.96022827877536812320e-06)
# erf(1 + s) = ERX + P(s) / Q(s) on [0.84375, 1.25]
PA = (-2.36211856075265944077e-03, 4.14856118683748331666e-01, -3.72207876035701323847e-01,
      3.18346619901161753674e-01, -1.10894694282396677476e-01, 3.54783043256182359371e-02,
      -2.16637559486879084300e-03)
QA = (1.0, 1.06420880400844228286e-01, 5.40397917702171048937e-01, 7.18286544141962662868e-02,
      1.26171219808761642112e-01, 1.36370839120290507362e-02, 1.19844998467991074170e-02)
# erfc(x) = exp(-x^2 - 0.5625 + R(1/x^2) / S(1/x^2)) / x on [1.25, 1/0.35]
RA = (-9.86494403484714822705e-03, -6.93858572707181764372e-01, -1.05586262253232909814e01,
      -6.23753324503260060396e01, -1.62396669462573470355e02, -1.84605092906711035994e02,
      -8.12874355063065934246e01, -9.81432934416914548592e00)
SA = (1.0, 1.96512716674392571292e01, 1.37657754143519042600e02, 4.34565877475229228821e02,
      6.45387271733267880336e02, 4.29008140027567833386e02, 1.08635005541779435134e02,
      6.57024977031928170135e00, -6.04244152148580987438e-02)
# ... and on [1/0.35, 6]
RB = (-9.86494292470009928597e-03, -7.99283237680523006574e-01, -1.77579549177547519889e01,
      -1.60636384855821916062e02, -6.37566443368389627722e02, -1.02509513161107724954e03,
      -4.83519191608651397019e02)
SB = (1.0, 3.03380607434824582924e01, 3.25792512996573918826e02, 1.53672958608443695994e03,
      3.19985821950859553908e03, 2.55305040643316442583e03, 4.74528541206955367215e02,
      -2.24409524465858183362e01)

# fdlibm compares the high 32 bits of |x|; these are the doubles those words stand for.
_TINY = 2.0**-28  # 0x3e300000
_SUBNORMAL = 2.0**-1015  # 0x00800000
_SPLIT = struct.unpack(">d", bytes.fromhex("4006DB6E00000000"))[0]  # about 1/0.35
_HIGH_WORD = np.uint64(0xFFFFFFFF00000000)

#: Elements per block of a large input (256 KiB of float64).
BLOCK = 1 << 15


def _poly(z: np.ndarray, coeffs: tuple[float, ...]) -> np.ndarray:
    """``c0 + z * (c1 + z * (c2 + ...))``, in fdlibm's order of operations."""
    acc = z * coeffs[-1]
    acc += coeffs[-2]
    for c in coeffs[-3::-1]:
        acc *= z
        acc += c
    return acc


def erf64(x: np.ndarray) -> np.ndarray:
    """erf of a float64 array (any shape); erf(+-inf) = +-1, NaN stays NaN."""
    x = np.asarray(x, dtype=np.float64)
    flat = x.ravel()
    if flat.size <= BLOCK:
        return _erf_block(flat).reshape(x.shape)
    # In blocks: each region's two dozen passes then run over arrays that stay in cache,
    # which is about twice as fast for large inputs.
    out = np.empty_like(flat)
    for start in range(0, flat.size, BLOCK):
        out[start:start + BLOCK] = _erf_block(flat[start:start + BLOCK])
    return out.reshape(x.shape)


def _erf_block(flat: np.ndarray) -> np.ndarray:
    """erf of a 1-d float64 array, region by region."""
    ax = np.abs(flat)
    # Every region below is written over this; what stays is |x| >= 6 (infinities included),
    # where erf rounds to +-1, and NaN, which matches no region.
    out = np.sign(flat)
    # Regions are gathered by index arrays (not boolean masks, which NumPy indexes slowly).
    i = np.flatnonzero(ax < 0.84375)
    if i.size:
        xi = flat[i]
        z = xi * xi
        y = xi + xi * (_poly(z, PP) / _poly(z, QQ))
        tiny = np.flatnonzero(np.abs(xi) < _TINY)
        if tiny.size:
            xt = xi[tiny]
            # Below 2**-28 erf(x) = x + x * (2/sqrt(pi) - 1); the scaled form avoids underflow.
            y[tiny] = np.where(np.abs(xt) < _SUBNORMAL, (8.0 * xt + EFX8 * xt) / 8.0,
                               xt + EFX * xt)
        out[i] = y

    i = np.flatnonzero((ax >= 0.84375) & (ax < 1.25))
    if i.size:
        s = ax[i] - 1.0
        s = ERX + _poly(s, PA) / _poly(s, QA)
        out[i] = np.copysign(s, flat[i])

    i = np.flatnonzero((ax >= 1.25) & (ax < 6.0))
    if i.size:
        a = ax[i]
        s = 1.0 / (a * a)
        ratio = np.empty_like(a)
        near = np.flatnonzero(a < _SPLIT)
        far = np.flatnonzero(a >= _SPLIT)
        sn, sf = s[near], s[far]
        ratio[near] = _poly(sn, RA) / _poly(sn, SA)
        ratio[far] = _poly(sf, RB) / _poly(sf, SB)
        # exp(-a*a) split as exp(-z*z) * exp((z-a)(z+a)) with z = a cut to its high 32 bits,
        # so that -z*z is exact and the large exponent loses no precision.
        z = (a.view(np.uint64) & _HIGH_WORD).view(np.float64)
        r = np.exp(-z * z - 0.5625)
        r *= np.exp((z - a) * (z + a) + ratio)
        r /= a
        out[i] = np.copysign(1.0 - r, flat[i])
    return out

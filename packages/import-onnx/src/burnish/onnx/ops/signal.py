"""ONNX's signal operators on burnish tensors: DFT (forward, inverse, one-sided) and STFT, as
products with cosine and sine matrices, so they run on any backend and carry gradients."""

from __future__ import annotations

import numpy as np

import burnish as bn
from burnish import Tensor


def _matrix(values: np.ndarray, like: Tensor) -> Tensor:
    return Tensor.from_data(values.astype(np.float32), device=like.device).cast(like.dtype)


def _fit(x: Tensor, axis: int, length: int) -> Tensor:
    """``x`` cut or zero-padded to ``length`` along ``axis``."""
    n = x.shape[axis]
    if n >= length:
        return x.narrow(axis, 0, length)
    pad = list(x.shape)
    pad[axis] = length - n
    return bn.cat([x, Tensor.zeros(pad, x.device, x.dtype)], axis)


def dft(x: Tensor, dft_length: int | None = None, axis: int = -2, inverse: int = 0,
        onesided: int = 0) -> Tensor:
    """ONNX DFT of ``x`` ``[..., n, ..., 1 or 2]`` (real, or real and imaginary parts) along
    ``axis``: ``[..., m, ..., 2]``, ``m`` the length or, ``onesided``, its first half and one.
    The one-sided inverse (irfft) gives a real signal ``[..., n, ..., 1]``."""
    axis = axis % x.ndim
    if dft_length is None:
        dft_length = 2 * (x.shape[axis] - 1) if inverse and onesided else x.shape[axis]
    n = dft_length
    # Move the transformed axis last, the components into two tensors.
    moved = x.swap_dims(axis, -2)
    real = moved.narrow(-1, 0, 1).squeeze(-1)
    imag = moved.narrow(-1, 1, 1).squeeze(-1) if x.shape[-1] == 2 else None
    if inverse and onesided:
        m = n // 2 + 1
        real = _fit(real, -1, m)
        imag = None if imag is None else _fit(imag, -1, m)
        k = np.arange(m)[:, None]
        t = np.arange(n)[None, :]
        weight = np.where((k == 0) | ((n % 2 == 0) & (k == n // 2)), 1.0, 2.0) / n
        angle = 2 * np.pi * k * t / n
        y = real.matmul(_matrix(weight * np.cos(angle), real))
        if imag is not None:
            y = y - imag.matmul(_matrix(weight * np.sin(angle), real))
        return y.unsqueeze(-1).swap_dims(axis, -2)
    real = _fit(real, -1, n)
    imag = None if imag is None else _fit(imag, -1, n)
    m = n // 2 + 1 if onesided else n
    angle = 2 * np.pi * np.arange(n)[:, None] * np.arange(m)[None, :] / n
    scale = 1.0 / n if inverse else 1.0
    sign = 1.0 if inverse else -1.0  # exp(sign * i * angle)
    cos, sin = _matrix(scale * np.cos(angle), real), _matrix(scale * np.sin(angle), real)
    out_real = real.matmul(cos)
    out_imag = real.matmul(sin) * sign
    if imag is not None:
        out_real = out_real - imag.matmul(sin) * sign
        out_imag = out_imag + imag.matmul(cos)
    y = bn.cat([out_real.unsqueeze(-1), out_imag.unsqueeze(-1)], -1)
    return y.swap_dims(axis, -2)


def stft(signal: Tensor, frame_step: int, window: Tensor | None = None,
         frame_length: int | None = None, onesided: int = 1) -> Tensor:
    """ONNX STFT of ``signal`` ``[batch, length, 1 or 2]``: the DFT of each windowed frame,
    ``[batch, frames, bins, 2]``."""
    if frame_length is None:
        frame_length = signal.shape[-2] if window is None else window.shape[0]
    frames = 1 + (signal.shape[-2] - frame_length) // frame_step
    pieces = [signal.narrow(1, f * frame_step, frame_length).unsqueeze(1)
              for f in range(frames)]
    framed = bn.cat(pieces, 1)  # [batch, frames, frame_length, components]
    if window is not None:
        framed = framed * window.cast(signal.dtype).reshape([1, 1, frame_length, 1])
    return dft(framed, frame_length, axis=2, onesided=onesided)


def mel_weight_matrix(num_mel_bins: int, dft_length: int, sample_rate: int,
                      lower_edge_hertz: float, upper_edge_hertz: float, dtype_name: str,
                      device) -> Tensor:
    """ONNX MelWeightMatrix: ``[dft_length // 2 + 1, num_mel_bins]`` triangular filters
    evenly spaced on the mel scale. Its size and values come from the scalar inputs alone,
    so it is made on the host (as ONNX's reference spaces the bands: over ``bins + 2``
    steps)."""
    from burnish.onnx.ops.core import const

    spectrogram_bins = dft_length // 2 + 1
    steps = np.arange(0, num_mel_bins + 2)
    low = 2595 * np.log1p(lower_edge_hertz / 700) / np.log(10)
    high = 2595 * np.log1p(upper_edge_hertz / 700) / np.log(10)
    mel = steps * ((high - low) / steps.shape[0]) + low
    edges = (((dft_length + 1) * (700 * np.expm1(mel / 2595 * np.log(10)))) // sample_rate)
    edges = edges.astype(int)
    weights = np.zeros((spectrogram_bins, num_mel_bins))
    for i in range(num_mel_bins):
        left, center, right = edges[i], edges[i + 1], edges[i + 2]
        if center == left:
            weights[center, i] = 1
        else:
            j = np.arange(left, center + 1)
            weights[j, i] = (j - left) / (center - left)
        if right > center:
            j = np.arange(center, right)
            weights[j, i] = (right - j) / (right - center)
    return const(weights.reshape(-1).tolist(), dtype_name, device, shape=list(weights.shape))

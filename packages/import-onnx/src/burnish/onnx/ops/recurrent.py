"""ONNX's recurrent operators (LSTM, GRU, RNN) with their activations, clip, peepholes,
directions, layouts and sequence lengths; standard LSTMs and PyTorch-style GRUs with constant
weights run as ``packed_recurrent`` (their gates packed when the model is imported); and
LinearAttention's recurrent state."""

from __future__ import annotations

import math
from collections.abc import Sequence

import burnish as bn
import burnish.functional as F
from burnish import Tensor


def activation(name: str, alpha: float | None = None, beta: float | None = None):
    """One of ONNX's recurrent activations as a function of a tensor."""
    name = name.lower()
    if name == "sigmoid":
        return F.sigmoid
    if name == "tanh":
        return lambda x: x.tanh()
    if name == "relu":
        return F.relu
    if name == "leakyrelu":
        a = 0.01 if alpha is None else alpha
        return lambda x: bn.where(x >= 0, x, x * a)
    if name == "thresholdedrelu":
        a = 1.0 if alpha is None else alpha
        return lambda x: bn.where(x > a, x, x.zeros_like())
    if name == "scaledtanh":
        return lambda x: (x * beta).tanh() * alpha
    if name == "hardsigmoid":
        a, b = (0.2 if alpha is None else alpha), (0.5 if beta is None else beta)
        return lambda x: F.hard_sigmoid(x, a, b)
    if name == "elu":
        a = 1.0 if alpha is None else alpha
        return lambda x: bn.where(x >= 0, x, (x.exp() - 1) * a)
    if name == "softsign":
        return lambda x: x / (x.abs() + 1)
    if name == "softplus":
        return lambda x: F.relu(x) + (-x.abs()).exp().log1p()
    if name == "affine":
        return lambda x: x * alpha + beta
    raise ValueError(f"unknown recurrent activation {name!r}")


def _activations(kind: str, names, alphas, betas, directions: int):
    defaults = {"LSTM": ["Sigmoid", "Tanh", "Tanh"], "GRU": ["Sigmoid", "Tanh"],
                "RNN": ["Tanh"]}[kind]
    names = list(names) if names else defaults * directions
    if len(names) == len(defaults) and directions == 2:
        names = names * 2
    alphas, betas = list(alphas or []), list(betas or [])
    out = []
    for i, name in enumerate(names):
        out.append(activation(name, alphas[i] if i < len(alphas) else None,
                              betas[i] if i < len(betas) else None))
    per = len(defaults)
    return [out[d * per:(d + 1) * per] for d in range(directions)]


def recurrent(kind: str, x: Tensor, w: Tensor, r: Tensor, b: Tensor | None = None,
              sequence_lens: Tensor | None = None, initial_h: Tensor | None = None,
              initial_c: Tensor | None = None, p: Tensor | None = None, *, hidden_size: int,
              direction: str = "forward", activations: Sequence[str] | None = None,
              activation_alpha=None, activation_beta=None, clip: float | None = None,
              input_forget: int = 0, layout: int = 0, linear_before_reset: int = 0):
    """ONNX LSTM, GRU or RNN (``kind``): returns ``(Y, Y_h)`` and, for LSTM, ``Y_c``."""
    if layout:
        x = x.swap_dims(0, 1)
        initial_h = None if initial_h is None else initial_h.swap_dims(0, 1)
        initial_c = None if initial_c is None else initial_c.swap_dims(0, 1)
    seq, batch = x.shape[0], x.shape[1]
    hidden = hidden_size
    directions = 2 if direction == "bidirectional" else 1
    gates = {"LSTM": 4, "GRU": 3, "RNN": 1}[kind]
    functions = _activations(kind, activations, activation_alpha, activation_beta, directions)
    lengths = None
    if sequence_lens is not None:
        lengths = sequence_lens.cast(bn.int64).reshape([batch, 1])
    ys, hs, cs = [], [], []
    # A GRU as PyTorch's (the reset gate applied after the product, default activations, no
    # clip, whole sequences) is one op per direction: ``functional.gru_sequence``.
    layer = (kind == "GRU" and linear_before_reset and clip is None and lengths is None
             and [n.lower() for n in (activations or [])] in ([], ["sigmoid", "tanh"] *
                                                               directions)
             and not activation_alpha and not activation_beta)
    for d in range(directions):
        backwards = direction == "reverse" or d == 1
        wd, rd = w[d], r[d]
        bd = b[d] if b is not None else Tensor.zeros([2 * gates * hidden], x.device, x.dtype)
        wb, rb = bd.narrow(0, 0, gates * hidden), bd.narrow(0, gates * hidden, gates * hidden)
        if layer:
            y, h = _gru_layer(x, wd, rd, wb, rb, initial_h[d] if initial_h is not None else
                              Tensor.zeros([batch, hidden], x.device, x.dtype), backwards)
            ys.append(y)
            hs.append(h)
            continue
        h = initial_h[d] if initial_h is not None else Tensor.zeros([batch, hidden], x.device,
                                                                     x.dtype)
        c = initial_c[d] if initial_c is not None else Tensor.zeros([batch, hidden], x.device,
                                                                     x.dtype)
        projected = x.matmul(wd.transpose()) + wb  # [seq, batch, gates * hidden]
        f = functions[d]
        outputs: list[Tensor] = [None] * seq  # type: ignore[list-item]
        steps = reversed(range(seq)) if backwards else range(seq)
        for t in steps:
            xt = projected[t]
            if kind == "GRU":
                xz, xr, xh = (xt.narrow(1, k * hidden, hidden) for k in range(3))
                rz, rr, rh = (rd.narrow(0, k * hidden, hidden) for k in range(3))
                bz, br, bh = (rb.narrow(0, k * hidden, hidden) for k in range(3))
                z = _clip(xz + h.matmul(rz.transpose()) + bz, clip)
                rt = _clip(xr + h.matmul(rr.transpose()) + br, clip)
                z, rt = f[0](z), f[0](rt)
                if linear_before_reset:
                    candidate = xh + rt * (h.matmul(rh.transpose()) + bh)
                else:
                    candidate = xh + (rt * h).matmul(rh.transpose()) + bh
                new_h = (1 - z) * f[1](_clip(candidate, clip)) + z * h
                new_c = c
            elif kind == "RNN":
                new_h = f[0](_clip(xt + h.matmul(rd.transpose()) + rb, clip))
                new_c = c
            else:
                pre = xt + h.matmul(rd.transpose()) + rb
                i_, o_, f_, c_ = (pre.narrow(1, k * hidden, hidden) for k in range(4))
                if p is not None:
                    pi, po, pf = (p[d].narrow(0, k * hidden, hidden) for k in range(3))
                    i_, f_ = i_ + pi * c, f_ + pf * c
                i_ = f[0](_clip(i_, clip))
                f_ = 1 - i_ if input_forget else f[0](_clip(f_, clip))
                new_c = f_ * c + i_ * f[1](_clip(c_, clip))
                if p is not None:
                    o_ = o_ + po * new_c
                new_h = f[0](_clip(o_, clip)) * f[2](new_c)
            if lengths is not None:
                alive = lengths > t
                new_h = bn.where(alive, new_h, h)
                new_c = bn.where(alive, new_c, c)
                outputs[t] = bn.where(alive, new_h, new_h.zeros_like())
            else:
                outputs[t] = new_h
            h, c = new_h, new_c
        ys.append(bn.stack(outputs, 0))
        hs.append(h)
        cs.append(c)
    y = bn.stack(ys, 1)  # [seq, dirs, batch, hidden]
    y_h = bn.stack(hs, 0)
    if layout:
        y = y.permute([2, 0, 1, 3])
        y_h = y_h.swap_dims(0, 1)
    if kind != "LSTM":
        return y, y_h
    y_c = bn.stack(cs, 0)
    return y, y_h, (y_c.swap_dims(0, 1) if layout else y_c)


def _gru_layer(x: Tensor, w: Tensor, r: Tensor, wb: Tensor, rb: Tensor, h: Tensor,
               backwards: bool) -> tuple[Tensor, Tensor]:
    """One direction of a GRU whose cell is ``functional.gru_cell``'s: ONNX's gates (z, r, h)
    reordered as the op's (r, z, n), the input's part of every step as one product."""
    hidden = h.shape[1]

    def reorder(t: Tensor) -> Tensor:
        z, reset, n = (t.narrow(0, k * hidden, hidden) for k in range(3))
        return bn.cat([reset, z, n], 0)

    projected = x.matmul(reorder(w).transpose()) + reorder(wb)  # [seq, batch, 3 * hidden]
    return F.gru_sequence(projected, reorder(r).transpose(), reorder(rb), h, backwards)


def _clip(x: Tensor, clip: float | None) -> Tensor:
    return x if clip is None else x.clamp(min=-clip, max=clip)


def packed_recurrent(kind: str, x: Tensor, weight: Tensor, hidden_weight: Tensor, bias: Tensor,
                     hidden_bias: Tensor | None = None, initial_h: Tensor | None = None,
                     initial_c: Tensor | None = None, *, direction: str = "forward",
                     layout: int = 0):
    """An ONNX LSTM (default activations, no peepholes, clip or sequence lengths) or GRU as
    PyTorch's (``linear_before_reset``, default activations, no clip or sequence lengths) whose
    gates were packed when the model was imported (``converters.layers.packed_gates``):
    ``weight`` ``[d_input, dirs * gates * hidden]`` and ``bias`` the input parts of every
    direction side by side, ``hidden_weight`` ``[dirs, hidden, gates * hidden]`` (and
    ``hidden_bias`` ``[dirs, gates * hidden]``, the GRU's recurrent bias), each direction's
    gates in the order of ``functional.lstm_sequence`` (i, f, g, o; the two biases summed) or
    ``functional.gru_sequence`` (r, z, n). One product with its bias for every step of every
    direction, then each direction's layer as one op. Returns ``(Y, Y_h)`` and, for LSTM,
    ``Y_c``, in ONNX's layout."""
    if layout:
        x = x.swap_dims(0, 1)
        initial_h = None if initial_h is None else initial_h.swap_dims(0, 1)
        initial_c = None if initial_c is None else initial_c.swap_dims(0, 1)
    batch = x.shape[1]
    directions, hidden, width = hidden_weight.shape
    zeros = Tensor.zeros([batch, hidden], x.device, x.dtype)
    every = F.linear(x, weight, bias)  # [seq, batch, dirs * gates * hidden]
    ys, hs, cs = [], [], []
    for d in range(directions):
        backwards = direction == "reverse" or d == 1
        h = zeros if initial_h is None else initial_h[d]
        projected = every.narrow(2, d * width, width) if directions > 1 else every
        if kind == "GRU":
            assert hidden_bias is not None
            y, h = F.gru_sequence(projected, hidden_weight[d], hidden_bias[d], h, backwards)
        else:
            c = zeros if initial_c is None else initial_c[d]
            y, h, c = F.lstm_sequence(projected, hidden_weight[d], h, c, backwards)
            cs.append(c)
        ys.append(y)
        hs.append(h)
    # [seq, batch, directions, hidden], so that the usual Transpose and Reshape to [seq, batch,
    # directions * hidden] that follows a bidirectional layer is a view.
    y, y_h = _stack(ys, 2), _stack(hs, 0)
    if layout:
        y, y_h = y.swap_dims(0, 1), y_h.swap_dims(0, 1)
    else:
        y = y.swap_dims(1, 2)
    if kind == "GRU":
        return y, y_h
    y_c = _stack(cs, 0)
    return y, y_h, (y_c.swap_dims(0, 1) if layout else y_c)


def _stack(parts: list[Tensor], dim: int) -> Tensor:
    """``bn.stack(parts, dim)``, one direction's result as a view rather than a copy."""
    return bn.stack(parts, dim) if len(parts) > 1 else parts[0].unsqueeze(dim)


def _heads(x: Tensor, heads: int) -> Tensor:
    """``[B, T, H * D]`` as ``[B, H, T, D]`` in float32."""
    b, t, hd = x.shape
    return x.reshape([b, t, heads, hd // heads]).swap_dims(1, 2).cast(bn.float32)


def linear_attention(query: Tensor, key: Tensor, value: Tensor,
                     past_state: Tensor | None = None, decay: Tensor | None = None,
                     beta: Tensor | None = None, *, q_num_heads: int, kv_num_heads: int,
                     scale: float = 0.0, update_rule: str = "gated_delta"
                     ) -> tuple[Tensor, Tensor]:
    """ONNX LinearAttention: the recurrent state ``[B, H_kv, d_k, d_v]`` updated token by
    token (``linear``, ``gated``, ``delta`` or ``gated_delta``) and read by each query head
    (key-value heads shared by groups of query heads), in float32; the output
    ``[B, T, H_q * d_v]`` and the final state."""
    b, t, _ = query.shape
    q, k, v = _heads(query, q_num_heads), _heads(key, kv_num_heads), _heads(value, kv_num_heads)
    d_k, d_v = q.shape[-1], v.shape[-1]
    group = q_num_heads // kv_num_heads
    if decay is not None:
        per_head = decay.shape[-1] == kv_num_heads
        decay = decay.reshape([b, t, kv_num_heads, 1]).swap_dims(1, 2).cast(bn.float32) \
            if per_head else _heads(decay, kv_num_heads)
    if beta is not None:
        beta = beta.reshape([b, t, beta.shape[-1], 1]).swap_dims(1, 2).cast(bn.float32)
    if past_state is not None:
        state = past_state.cast(bn.float32)
        state_dtype = past_state.dtype
    else:
        state = Tensor.zeros([b, kv_num_heads, d_k, d_v], query.device, bn.float32)
        state_dtype = query.dtype
    factor = scale if scale else 1.0 / math.sqrt(d_k)
    outputs = []
    for i in range(t):
        k_t, v_t = k[:, :, i, :], v[:, :, i, :]
        if decay is not None:
            state = state * decay[:, :, i, :].exp().unsqueeze(-1)
        if beta is not None:
            retrieved = (state * k_t.unsqueeze(-1)).sum(2)
            v_t = beta[:, :, i, :] * (v_t - retrieved)
        state = state + k_t.unsqueeze(-1) * v_t.unsqueeze(-2)
        # Query head h reads key-value head h // group.
        shared = state.unsqueeze(2).expand([b, kv_num_heads, group, d_k, d_v]).reshape(
            [b, q_num_heads, d_k, d_v]) if group > 1 else state
        read = (q[:, :, i, :].unsqueeze(-1) * shared).sum(2)  # [B, H_q, d_v]
        outputs.append((read * factor).unsqueeze(2))
    output = bn.cat(outputs, 2).swap_dims(1, 2).reshape([b, t, q_num_heads * d_v])
    return output.cast(query.dtype), state.cast(state_dtype)

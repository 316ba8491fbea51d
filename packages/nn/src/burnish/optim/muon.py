"""Muon: momentum orthogonalised by Newton–Schulz for 2-d weights, AdamW for the others."""

from __future__ import annotations

import math

from burnish import Tensor
from burnish.optim.adam import AdamW
from burnish.optim.grads import GradientClipping
from burnish.optim.optimizer import Optimizer, State

#: The quintic's coefficients of Keller Jordan's reference (also PyTorch's and Burn's).
NS_COEFFICIENTS = (3.4445, -4.7750, 2.0315)


def newton_schulz(matrix: Tensor, steps: int = 5,
                  coefficients: tuple[float, float, float] = NS_COEFFICIENTS,
                  epsilon: float = 1e-7) -> Tensor:
    """An approximately orthogonal matrix of ``matrix``'s shape (``U V^T`` of its SVD, singular
    values pushed towards 1): ``X = M / max(|M|_F, epsilon)``, then ``steps`` times
    ``A = X X^T``, ``X = a X + (b A + c A A) X``, on the wide orientation. Works in the
    matrix's dtype (the reference uses bfloat16)."""
    a, b, c = coefficients
    tall = matrix.shape[0] > matrix.shape[1]
    x = matrix.transpose() if tall else matrix
    norm = float((x * x).sum().sqrt().item())
    x = x * (1.0 / max(norm, epsilon))
    for _ in range(steps):
        gram = x.matmul(x.transpose())
        x = x * a + (gram * b + gram.matmul(gram) * c).matmul(x)
    return x.transpose() if tall else x


class Muon(Optimizer):
    """Muon (Jordan et al., 2024) for 2-d parameters, as PyTorch's ``optim.Muon``:
    ``buf = momentum buf + (1 - momentum) g``; ``u = (1 - momentum) g + momentum buf`` with
    ``nesterov``, else ``buf``; ``p = p (1 - lr weight_decay) - lr s newton_schulz(u)``. With
    ``adjust_lr="original"`` the scale is ``s = sqrt(max(1, d_output / d_input))`` for
    burnish's ``[d_input, d_output]`` weights (PyTorch's ``sqrt(max(1, rows / cols))`` for its
    ``[out, in]`` ones); with ``"match_rms_adamw"`` it is ``0.2 sqrt(max(d_input, d_output))``,
    which gives updates of AdamW's size, so AdamW's rate and weight decay carry over.

    Parameters that are not 2-d (biases, norms, conv kernels) are updated by ``fallback``,
    AdamW with the same weight decay by default, at ``lr * fallback_lr_ratio``; its state is
    kept beside Muon's, so ``save``/``load`` cover both. Muon's reference also keeps embeddings
    and the output layer on AdamW: give those to a second optimizer.
    """

    def __init__(self, momentum: float = 0.95, nesterov: bool = True, ns_steps: int = 5,
                 ns_coefficients: tuple[float, float, float] = NS_COEFFICIENTS,
                 epsilon: float = 1e-7, weight_decay: float = 0.1,
                 adjust_lr: str = "original", fallback: Optimizer | None = None,
                 fallback_lr_ratio: float = 1.0,
                 gradient_clipping: GradientClipping | None = None):
        super().__init__(gradient_clipping)
        if adjust_lr not in ("original", "match_rms_adamw"):
            raise ValueError(f"adjust_lr must be 'original' or 'match_rms_adamw', "
                             f"got {adjust_lr!r}")
        self.adjust_lr = adjust_lr
        self.momentum = momentum
        self.nesterov = nesterov
        self.ns_steps = ns_steps
        self.ns_coefficients = tuple(ns_coefficients)
        self.epsilon = epsilon
        self.weight_decay = weight_decay
        self.fallback = AdamW(weight_decay=weight_decay) if fallback is None else fallback
        self.fallback_lr_ratio = fallback_lr_ratio

    def update(self, value: Tensor, grad: Tensor, state: State, lr: float) -> Tensor:
        if value.ndim != 2:
            return self.fallback.update(value, grad, state, lr * self.fallback_lr_ratio)
        buffer = state.get("momentum")
        buffer = grad * (1.0 - self.momentum) if buffer is None else \
            buffer * self.momentum + grad * (1.0 - self.momentum)
        state["momentum"] = buffer
        direction = grad * (1.0 - self.momentum) + buffer * self.momentum if self.nesterov \
            else buffer
        orthogonal = newton_schulz(direction, self.ns_steps, self.ns_coefficients,  # type: ignore[arg-type]
                                   self.epsilon)
        d_input, d_output = value.shape
        if self.adjust_lr == "original":
            scale = math.sqrt(max(1.0, d_output / d_input))
        else:
            scale = 0.2 * math.sqrt(max(d_input, d_output))
        if self.weight_decay:
            value = value * (1.0 - lr * self.weight_decay)
        return value - orthogonal * (lr * scale)

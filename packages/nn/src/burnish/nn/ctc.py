"""CtcLoss: connectionist temporal classification, a forward pass over alignments in log space."""

from __future__ import annotations

import numpy as np

from burnish import Tensor, cat, stack, where
from burnish.errors import DTypeError, ShapeError
from burnish.nn.loss import Reduction, reduce
from burnish.nn.module import Module
from burnish.shape import show


def _log_sum_exp(terms: list[Tensor]) -> Tensor:
    """``log(sum(exp(term)))`` elementwise over a few same-shape tensors, shifted by their
    (detached) maximum so it never overflows and its gradient is the softmax of the terms."""
    top = terms[0]
    for term in terms[1:]:
        top = top.maximum(term)
    top = top.detach()
    total = (terms[0] - top).exp()
    for term in terms[1:]:
        total = total + (term - top).exp()
    return top + total.log()


class CtcLoss(Module):
    """The CTC loss (Graves et al., 2006): the negative log-probability of each target under
    all alignments of it to the inputs, as PyTorch's ``CTCLoss`` computes it, but batch-first.

    ``forward(log_probs, targets, input_lengths, target_lengths)``: ``log_probs`` ``[batch,
    time, classes]`` (log-softmax outputs), ``targets`` ``[batch, max_target]`` ints padded
    with anything, ``input_lengths`` and ``target_lengths`` ``[batch]`` ints. Class ``blank``
    separates repeated labels. ``reduction="mean"`` divides each sample's loss by its target
    length, then averages over the batch (PyTorch's rule). A target that no alignment fits (the
    input too short) costs ``inf``, or zero with ``zero_infinity``.

    Impossible states carry a large finite negative log-probability rather than ``-inf``, so
    the recursion's gradients stay finite.
    """

    blank: int = 0
    reduction: Reduction = "mean"
    zero_infinity: bool = False

    def forward(self, log_probs: Tensor, targets: Tensor, input_lengths: Tensor,
                target_lengths: Tensor) -> Tensor:
        batch, time, classes = self._check(log_probs, targets, input_lengths, target_lengths)
        device, dtype = log_probs.device, log_probs.dtype
        impossible = float(np.finfo(dtype.numpy).min) / 4
        # The extended labels: blank, t1, blank, t2, ..., blank ([batch, 2 * max_target + 1]).
        labels = targets.int().clamp(0, classes - 1)
        if labels.shape[1] == 0:
            # Only empty targets: one padding label keeps the state arrays at least 3 wide.
            labels = Tensor.zeros([batch, 1], device, labels.dtype)
        blanks = labels.full_like(self.blank)
        extended = cat([stack([blanks, labels], 2).reshape([batch, -1]), blanks[:, :1]], 1)
        states = extended.shape[1]
        # A state may be entered from two back when it is a label unlike the one two back.
        two_back = cat([Tensor.full([batch, 2], -1, device, extended.dtype), extended[:, :-2]], 1)
        may_skip = (extended != self.blank) & (extended != two_back)
        emissions = log_probs.gather(2, extended.unsqueeze(1).expand([batch, time, states]))
        start = Tensor.arange(states, device=device).unsqueeze(0) < 2
        alpha = where(start, emissions[:, 0], impossible)
        lengths = input_lengths.int().unsqueeze(1)
        filler = Tensor.full([batch, 2], impossible, device, dtype)
        for t in range(1, time):
            one_back = cat([filler[:, :1], alpha[:, :-1]], 1)
            skipped = where(may_skip, cat([filler, alpha[:, :-2]], 1), impossible)
            step = _log_sum_exp([alpha, one_back, skipped]) + emissions[:, t]
            alpha = where(lengths > t, step, alpha)
        # Alignments end on the last label or the blank after it.
        target_lengths = target_lengths.int()
        last = alpha.gather(1, (target_lengths * 2).unsqueeze(1)).squeeze(1)
        before = alpha.gather(1, (target_lengths * 2 - 1).clamp_min(0).unsqueeze(1)).squeeze(1)
        before = where(target_lengths > 0, before, impossible)
        loss = -_log_sum_exp([last, before])
        unreachable = loss > -impossible / 2
        loss = where(unreachable, 0.0 if self.zero_infinity else float("inf"), loss)
        if self.reduction == "mean":
            return (loss / target_lengths.clamp_min(1).cast(dtype)).mean()
        return reduce(loss, self.reduction)

    def _check(self, log_probs: Tensor, targets: Tensor, input_lengths: Tensor,
               target_lengths: Tensor) -> list[int]:
        if log_probs.ndim != 3:
            raise ShapeError(f"ctc: log_probs must be [batch, time, classes], got "
                             f"{show(log_probs.shape)}")
        if not log_probs.dtype.is_float:
            raise DTypeError(f"ctc: log_probs must be floats, got {log_probs.dtype}")
        batch, time, classes = log_probs.dims()
        if targets.ndim != 2 or targets.shape[0] != batch:
            raise ShapeError(f"ctc: targets must be [batch, max_target] with batch {batch}, got "
                             f"{show(targets.shape)}")
        for name, lengths in (("input_lengths", input_lengths),
                              ("target_lengths", target_lengths)):
            if list(lengths.shape) != [batch]:
                raise ShapeError(f"ctc: {name} must be [batch] = {show([batch])}, got "
                                 f"{show(lengths.shape)}")
        if input_lengths.max().item() > time or input_lengths.min().item() < 1:
            raise ShapeError(f"ctc: input_lengths must be in 1..{time} (the time dim), got "
                             f"{input_lengths.tolist()}")
        if target_lengths.max().item() > targets.shape[1] or target_lengths.min().item() < 0:
            raise ShapeError(f"ctc: target_lengths must be in 0..{targets.shape[1]} (the "
                             f"targets' width), got {target_lengths.tolist()}")
        if not 0 <= self.blank < classes:
            raise ValueError(f"ctc: blank {self.blank} is not one of the {classes} classes")
        return [batch, time, classes]

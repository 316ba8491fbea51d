"""Normalization layers: LayerNorm, RmsNorm, GroupNorm, InstanceNorm and BatchNorm (each
computes in float32 under ``burnish.autocast``, whatever its input's dtype; BatchNorm then
returns its input's dtype, the others float32, as under ``torch.autocast``)."""

from __future__ import annotations

from burnish import Device, Tensor
from burnish import amp as _amp
from burnish import functional as F
from burnish.dtype import promote
from burnish.nn.config import Config
from burnish.nn.module import Module
from burnish.nn.param import Param, is_autodiff


class LayerNormConfig(Config):
    d_model: int
    epsilon: float = 1e-5

    def init(self, device: Device | str | None = None) -> LayerNorm:
        return LayerNorm(Param(Tensor.ones([self.d_model], device)),
                         Param(Tensor.zeros([self.d_model], device)), self.epsilon)


class LayerNorm(Module):
    """``(x - mean) / sqrt(var + epsilon) * gamma + beta`` over the last dim (biased var)."""

    gamma: Param
    beta: Param
    epsilon: float = 1e-5

    def forward(self, x: Tensor) -> Tensor:
        x = _amp.full(x)
        gamma, beta = self.gamma.val(), self.beta.val()
        dtype = promote(promote(x.dtype, gamma.dtype), beta.dtype)  # as x * gamma + beta
        return F.layer_norm(x.cast(dtype), gamma.cast(dtype), beta.cast(dtype), self.epsilon)


class RmsNormConfig(Config):
    d_model: int
    epsilon: float = 1e-5

    def init(self, device: Device | str | None = None) -> RmsNorm:
        return RmsNorm(Param(Tensor.ones([self.d_model], device)), self.epsilon)


class RmsNorm(Module):
    """``x / sqrt(mean(x^2) + epsilon) * gamma`` over the last dim."""

    gamma: Param
    epsilon: float = 1e-5

    def forward(self, x: Tensor) -> Tensor:
        x = _amp.full(x)
        return x * ((x * x).mean(-1, keepdim=True) + self.epsilon).rsqrt() * self.gamma.val()


class GroupNormConfig(Config):
    num_groups: int
    num_channels: int
    epsilon: float = 1e-5
    affine: bool = True

    def init(self, device: Device | str | None = None) -> GroupNorm:
        if self.num_channels % self.num_groups:
            raise ValueError(f"{self.num_channels} channels are not divisible into "
                             f"{self.num_groups} groups")
        gamma = Param(Tensor.ones([self.num_channels], device)) if self.affine else None
        beta = Param(Tensor.zeros([self.num_channels], device)) if self.affine else None
        return GroupNorm(gamma, beta, self.num_groups, self.epsilon)


class GroupNorm(Module):
    """Normalizes ``[batch, channels, ...]`` over each group of channels and the spatial dims;
    ``InstanceNorm`` is the case of one group per channel."""

    gamma: Param | None
    beta: Param | None
    num_groups: int
    epsilon: float = 1e-5

    def forward(self, x: Tensor) -> Tensor:
        return _group_norm(x, self.num_groups, self.gamma, self.beta, self.epsilon)


class InstanceNormConfig(Config):
    num_channels: int
    epsilon: float = 1e-5
    affine: bool = True

    def init(self, device: Device | str | None = None) -> InstanceNorm:
        gamma = Param(Tensor.ones([self.num_channels], device)) if self.affine else None
        beta = Param(Tensor.zeros([self.num_channels], device)) if self.affine else None
        return InstanceNorm(gamma, beta, self.epsilon)


class InstanceNorm(Module):
    """Normalizes ``[batch, channels, ...]`` over the spatial dims of each channel of each
    sample, then scales and shifts per channel (``affine``; PyTorch's default is off, Burn's
    on). No running statistics: training and evaluation agree."""

    gamma: Param | None
    beta: Param | None
    epsilon: float = 1e-5

    def forward(self, x: Tensor) -> Tensor:
        return _group_norm(x, x.shape[1], self.gamma, self.beta, self.epsilon)


def _group_norm(x: Tensor, num_groups: int, gamma: Param | None, beta: Param | None,
                epsilon: float) -> Tensor:
    x = _amp.full(x)
    shape = x.dims()
    grouped = x.reshape([shape[0], num_groups, -1])
    mean = grouped.mean(-1, keepdim=True)
    centered = grouped - mean
    var = (centered * centered).mean(-1, keepdim=True)
    y = (centered * (var + epsilon).rsqrt()).reshape(shape)
    if gamma is None:
        return y
    assert beta is not None  # given together with gamma
    affine_shape = [1, shape[1]] + [1] * (len(shape) - 2)
    return y * gamma.val().reshape(affine_shape) + beta.val().reshape(affine_shape)


class BatchNormConfig(Config):
    num_features: int
    epsilon: float = 1e-5
    momentum: float = 0.1

    def init(self, device: Device | str | None = None) -> BatchNorm:
        n = self.num_features
        return BatchNorm(
            Param(Tensor.ones([n], device)), Param(Tensor.zeros([n], device)),
            Param(Tensor.zeros([n], device), require_grad=False),
            Param(Tensor.ones([n], device), require_grad=False),
            self.epsilon, self.momentum,
        )


class BatchNorm(Module):
    """Normalizes ``[batch, channels, ...]`` per channel.

    While training (an autodiff backend) it uses the batch's statistics and moves the running
    ones towards them: ``running = (1 - momentum) * running + momentum * batch``, the running
    variance unbiased (PyTorch's rule). Otherwise (``valid()``) it uses the running statistics.
    The running statistics are frozen params: recorded, never optimized.
    """

    gamma: Param
    beta: Param
    running_mean: Param
    running_var: Param
    epsilon: float = 1e-5
    momentum: float = 0.1

    def forward(self, x: Tensor) -> Tensor:
        channels = x.shape[1]
        shape = [1, channels] + [1] * (x.ndim - 2)
        if is_autodiff(x):
            # One op (cuDNN's on cuda) and one for its gradient; the statistics it returns
            # (detached) move the running ones. A 16-bit input (autocast's activations) goes in
            # as it is: the op normalises in float32 with the float32 parameters and returns
            # the input's dtype, and its gradient keeps the 16-bit input, not a float32 copy.
            y, mean, invstd = F.batch_norm(x, self.gamma.val(), self.beta.val(), self.epsilon,
                                           return_stats=True)
            count = x.numel() // channels
            var = (invstd * invstd).recip() - self.epsilon
            self.running_mean = self._moved(self.running_mean, mean)
            self.running_var = self._moved(self.running_var, var * (count / max(count - 1, 1)))
            return y
        # Per channel first, so that the full-size work is one pass, ``x * scale + shift``
        # (inference is bound by the passes over the activations). Under autocast in float32,
        # the output in the input's dtype (as torch.autocast's batch_norm).
        full = _amp.full(x)
        scale = self.gamma.val() * (self.running_var.val() + self.epsilon).rsqrt()
        shift = self.beta.val() - self.running_mean.val() * scale
        y = full.mul_add(scale.reshape(shape), shift.reshape(shape))
        return y if full is x else y.cast(x.dtype)

    def _moved(self, running: Param, batch: Tensor) -> Param:
        current = running.val()
        value = current * (1.0 - self.momentum) + batch * self.momentum
        return running.with_tensor(value.cast(current.dtype))

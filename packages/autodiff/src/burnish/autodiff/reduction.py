"""Backward rules of reductions, scans and sorts.

Reductions spread the gradient back over what they reduced. ``max`` and ``min`` without indices
share it evenly among tied extremes (PyTorch's ``amax``/``amin`` and ``max()``); ops that pick
elements by index (``max_with_indices``, sorts, top-k) send it back to the picked ones, so ties
follow the index the op returns.
Products are exact with zeros in the input, where dividing by the element would give NaN.
"""

from __future__ import annotations

from burnish.autodiff.inner_math import expand_to, scalar, scatter_zeros
from burnish.dtype import bool_


def element_count(shape: tuple[int, ...], dim: int | None) -> int:
    """The number of elements a reduction over ``dim`` (None: all) combines."""
    if dim is not None:
        return shape[dim]
    n = 1
    for d in shape:
        n *= d
    return n


# -- rules: rule(inner, dtype, grad, *saved) -> a gradient per input ------------------------------


def sum_backward(b, dtype, g, shape):
    return (expand_to(b, g, shape),)


def mean_backward(b, dtype, g, shape, count):
    return (expand_to(b, b.div_scalar(g, float(count), dtype), shape),)


def prod_backward(b, dtype, g, x, dim):
    shape = x.shape
    if dim is None:
        x = b.reshape(x, (element_count(shape, None),))
    others = _product_of_others(b, x, 0 if dim is None else dim, dtype)
    return (b.reshape(b.mul(g, others), shape),)


def _product_of_others(b, x, dim, dtype):
    """For each element, the product of the others along ``dim``: the exclusive running products
    from the left and from the right, multiplied. Exact with zeros, unlike ``prod / x``."""
    n = x.shape[dim]
    whole = tuple((0, s, 1) for s in x.shape)

    def cut(y, start, stop):
        return b.slice(y, whole[:dim] + ((start, stop, 1),) + whole[dim + 1:])

    ones = b.ones(x.shape[:dim] + (1,) + x.shape[dim + 1:], dtype, b._device_of(x))
    left = b.cat([ones, cut(b.cumprod(x, dim), 0, n - 1)], dim)
    from_right = b.flip(b.cumprod(b.flip(x, (dim,)), dim), (dim,))
    right = b.cat([cut(from_right, 1, n), ones], dim)
    return b.mul(left, right)


def extreme_backward(b, dtype, g, x, out, dim):
    """max/min without indices: the gradient is shared evenly among the elements equal to the
    result along ``dim`` (all of them when None). A NaN result is shared among the NaNs."""
    hit = b.logical_or(b.equal(x, out), b.logical_and(b.is_nan(x), b.is_nan(out)))
    mask = b.cast(hit, bool_, dtype)
    share = b.div(g, b.sum(mask, dim))
    return (b.mul(mask, share),)


def pick_backward(b, dtype, g, indices, shape, dim):
    """Ops that pick elements (max/min, sorts, topk): the gradient goes back to the picked ones."""
    if dim is None:
        n = element_count(shape, None)
        flat = scatter_zeros(b, b.reshape(g, (1,)), indices, (n,), 0, dtype)
        return (b.reshape(flat, shape),)
    return (scatter_zeros(b, g, indices, shape, dim, dtype),)


def var_backward(b, dtype, g, x, dim, correction):
    kept = element_count(x.shape, dim) - correction
    scale = 2.0 / kept if kept > 0 else float("nan")
    centered = b.sub(x, b.mean(x, dim, dtype))
    return (b.mul(expand_to(b, g, x.shape), b.mul_scalar(centered, scale, dtype)),)


def cumsum_backward(b, dtype, g, dim):
    return (_reverse_cumsum(b, g, dim),)


def _reverse_cumsum(b, x, dim):
    return b.flip(b.cumsum(b.flip(x, (dim,)), dim), (dim,))


def cumprod_backward(b, dtype, g, x, dim):
    # d out_j / d x_i = prod(x_k, k <= j, k != i) for j >= i. With the zeros of x replaced by
    # ones (x1, running product p1) that product is p1_j / x1_i when no other zero is among
    # x_0..x_j, else 0: the count of zeros up to j must equal x_i's own (0 or 1). Exact with
    # zeros, where dividing out by x_i would give NaN.
    zero = scalar(b, 0.0, dtype, x)
    is_zero = b.equal(x, zero)
    x1 = b.where(is_zero, scalar(b, 1.0, dtype, x), x)
    weighted = b.mul(g, b.cumprod(x1, dim))
    zeros_so_far = b.cumsum(b.cast(is_zero, bool_, dtype), dim)
    none_yet = b.equal(zeros_so_far, zero)
    one_so_far = b.equal(zeros_so_far, scalar(b, 1.0, dtype, x))
    sum_none = _reverse_cumsum(b, b.where(none_yet, weighted, zero), dim)
    sum_one = _reverse_cumsum(b, b.where(one_so_far, weighted, zero), dim)
    return (b.div(b.where(is_zero, sum_one, sum_none), x1),)

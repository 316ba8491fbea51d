"""burnish.quantization's schemes (validation, the scales' shapes, the form records keep) and
QuantizedTensor's construction from parts; the arithmetic is the conformance suite's."""

from __future__ import annotations

import numpy as np
import pytest

import burnish as bn
from burnish import DTypeError, ShapeError, Tensor
from burnish.quantization import (
    PerBlock,
    PerChannel,
    PerTensor,
    QuantizedTensor,
    QuantScheme,
    scales_shape,
)

SCHEMES = [QuantScheme(), QuantScheme("uint8", PerChannel(-1), "affine", "float16"),
           QuantScheme("int4", PerBlock(16, axis=0), "symmetric", bn.float32)]


@pytest.mark.parametrize("scheme", SCHEMES, ids=str)
def test_schemes_read_back_from_their_record_form(scheme):
    assert QuantScheme.from_dict(scheme.to_dict()) == scheme
    assert scheme.scale_dtype in (bn.float32, bn.float16)


def test_scheme_refuses_what_it_does_not_know():
    with pytest.raises(DTypeError, match="unknown quantized value type 'int2'"):
        QuantScheme("int2")
    with pytest.raises(ValueError, match="unknown quantization mode 'asymmetric'"):
        QuantScheme(mode="asymmetric")
    with pytest.raises(DTypeError, match="scales are float32 or float16"):
        QuantScheme(scale_dtype=bn.bfloat16)
    with pytest.raises(TypeError, match="PerTensor"):
        QuantScheme(granularity="channel")  # type: ignore[arg-type]
    with pytest.raises(ShapeError, match="positive int"):
        PerBlock(0)
    with pytest.raises(ValueError, match="not a quantization scheme"):
        QuantScheme.from_dict({"value": "int8"})


def test_scales_shapes_follow_the_granularity():
    assert scales_shape(QuantScheme(granularity=PerTensor()), (4, 6)) == ()
    assert scales_shape(QuantScheme(granularity=PerChannel(1)), (4, 6)) == (6,)
    assert scales_shape(QuantScheme(granularity=PerBlock(3)), (4, 6)) == (4, 2)
    assert scales_shape(QuantScheme(granularity=PerBlock(2, axis=0)), (4, 6)) == (2, 6)
    with pytest.raises(ShapeError, match="blocks of 4 do not divide dim 1 of shape \\[4, 6\\]"):
        scales_shape(QuantScheme(granularity=PerBlock(4)), (4, 6))


def test_from_parts_checks_each_part():
    x = Tensor.from_data(np.linspace(-1, 1, 12, dtype=np.float32).reshape(3, 4))
    scheme = QuantScheme("int4", PerChannel(0), "affine")
    q = x.quantize(scheme)
    again = QuantizedTensor.from_parts(q.values, q.scales, q.zero_points, scheme, (3, 4))
    np.testing.assert_array_equal(again.dequantize().to_numpy(), q.dequantize().to_numpy())
    assert q.values.shape == [6] and q.nbytes() == 6 + 3 * 4 + 3
    with pytest.raises(ShapeError, match="scales of shape \\[3\\] where the scheme needs \\[4\\]"):
        QuantizedTensor.from_parts(q.values, q.scales, q.zero_points,
                                   QuantScheme("int4", PerChannel(1), "affine"), (3, 4))
    with pytest.raises(ShapeError, match="takes zero points, but none were given"):
        QuantizedTensor.from_parts(q.values, q.scales, None, scheme, (3, 4))
    with pytest.raises(DTypeError, match="values of dtype int8 where the scheme needs uint8"):
        QuantizedTensor.from_parts(q.values.cast(bn.int8), q.scales, q.zero_points, scheme,
                                   (3, 4))
    with pytest.raises(TypeError, match="tensor.quantize"):
        QuantizedTensor()


def test_a_quantized_tensor_is_not_a_float_tensor():
    q = Tensor.from_data(np.ones((2, 2), np.float32)).quantize()
    with pytest.raises(TypeError, match="expected a Tensor"):
        Tensor.from_data(np.ones((2, 2), np.float32)) + q  # type: ignore[operator]
    assert "QuantizedTensor(shape=[2, 2], int8 per tensor, symmetric" in repr(q)

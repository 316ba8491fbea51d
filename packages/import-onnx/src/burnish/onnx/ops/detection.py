"""ONNX's object detection operators on burnish tensors: NonMaxSuppression (the overlaps
computed in Tensor ops, the greedy selection, whose output size depends on the data, on the
host) and RoiAlign (bilinear samples gathered in Tensor ops)."""

from __future__ import annotations

import math

import numpy as np

import burnish as bn
from burnish import Tensor
from burnish.onnx.ops.core import host


def _extents(boxes: Tensor, center_point_box: int) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """Each box's ``x_min, x_max, y_min, y_max`` (``[batch, boxes]``): from two corners
    ``[y1, x1, y2, x2]`` in either order, or from ``[x_center, y_center, width, height]``."""
    a, b, c, d = (boxes[:, :, i] for i in range(4))
    if center_point_box:
        return a - c / 2, a + c / 2, b - d / 2, b + d / 2
    return b.minimum(d), b.maximum(d), a.minimum(c), a.maximum(c)


def overlaps(boxes: Tensor, center_point_box: int = 0) -> Tensor:
    """The intersection over union of every two boxes of each batch entry, ``[batch, boxes,
    boxes]``; 0 where boxes do not intersect or one has no area."""
    x_min, x_max, y_min, y_max = _extents(boxes, center_point_box)
    width = x_max.unsqueeze(2).minimum(x_max.unsqueeze(1)) - \
        x_min.unsqueeze(2).maximum(x_min.unsqueeze(1))
    height = y_max.unsqueeze(2).minimum(y_max.unsqueeze(1)) - \
        y_min.unsqueeze(2).maximum(y_min.unsqueeze(1))
    intersection = width.clamp_min(0.0) * height.clamp_min(0.0)
    area = (x_max - x_min) * (y_max - y_min)
    union = area.unsqueeze(2) + area.unsqueeze(1) - intersection
    valid = (intersection > 0) & (area.unsqueeze(2) > 0) & (area.unsqueeze(1) > 0) & (union > 0)
    safe = union.mask_fill(~valid, 1.0)
    return (intersection / safe).mask_fill(~valid, 0.0)


def non_max_suppression(boxes: Tensor, scores: Tensor, max_output_boxes_per_class: int = 0,
                        iou_threshold: float = 0.0, score_threshold: float | None = None,
                        center_point_box: int = 0) -> Tensor:
    """ONNX NonMaxSuppression: per batch entry and class, boxes taken by falling score
    (the lower index first among equal scores), each kept unless it overlaps a kept one by
    more than ``iou_threshold``; ``[selected, 3]`` int64 rows ``(batch, class, box)``."""
    iou = host(overlaps(boxes, center_point_box))
    values = host(scores)
    selected = []
    limit = max(int(max_output_boxes_per_class), 0)
    for batch in range(values.shape[0]):
        for klass in range(values.shape[1]):
            row = values[batch, klass]
            order = sorted(range(row.shape[0]), key=lambda i: (-row[i], i))
            if score_threshold is not None:
                order = [i for i in order if row[i] > score_threshold]
            kept: list[int] = []
            for box in order:
                if len(kept) >= limit:
                    break
                if all(iou[batch, box, other] <= iou_threshold for other in kept):
                    kept.append(box)
                    selected.append((batch, klass, box))
    return Tensor.from_data(np.array(selected, np.int64).reshape(-1, 3), device=boxes.device)


def _bin_samples(start: Tensor, size: Tensor, bins: int, grid: Tensor, most: int) -> Tensor:
    """The sample positions of each region's bins along one dim, ``[rois, bins, most]``:
    ``grid`` (per region) evenly spaced points in each bin, padded to ``most``."""
    bin_size = (size / bins).reshape([-1, 1, 1])
    index = Tensor.arange(0, bins, device=start.device).cast(bn.float32).reshape([1, -1, 1])
    step = Tensor.arange(0, most, device=start.device).cast(bn.float32).reshape([1, 1, -1])
    return start.reshape([-1, 1, 1]) + index * bin_size + \
        (step + 0.5) * bin_size / grid.reshape([-1, 1, 1])


def _bilinear_taps(position: Tensor, size: int) -> tuple[list[Tensor], list[Tensor], Tensor]:
    """RoiAlign's two taps along one dim: their indices, weights, and whether the position
    lies within ``[-1, size]`` (outside, the sample counts as 0)."""
    inside = (position >= -1.0) & (position <= float(size))
    position = position.clamp_min(0.0)
    low = position.floor().clamp(max=float(size - 1))
    last = low >= size - 1
    position = bn.where(last, low, position)
    high = bn.where(last, low, low + 1)
    fraction = position - low
    return [low.cast(bn.int64), high.cast(bn.int64)], [1 - fraction, fraction], inside


def roi_align(x: Tensor, rois: Tensor, batch_indices: Tensor, output_height: int = 1,
              output_width: int = 1, sampling_ratio: int = 0, spatial_scale: float = 1.0,
              mode: str = "avg", coordinate_transformation_mode: str = "half_pixel"
              ) -> Tensor:
    """ONNX RoiAlign: each region ``[x1, y1, x2, y2]`` of ``rois`` cut into
    ``output_height x output_width`` bins, each bin the average (or maximum) of bilinear
    samples on a regular grid in it: ``[rois, C, output_height, output_width]``. With
    ``sampling_ratio`` 0 each region's grid follows its size; the largest grid is read on
    the host to size the sample tensor, smaller ones masked."""
    n, channels, height, width = x.shape
    regions = rois.shape[0]
    half_pixel = coordinate_transformation_mode == "half_pixel"
    boxes = rois.cast(bn.float32) * spatial_scale - (0.5 if half_pixel else 0.0)
    start_w, start_h, end_w, end_h = (boxes[:, i] for i in range(4))
    size_w, size_h = end_w - start_w, end_h - start_h
    if not half_pixel:
        size_w, size_h = size_w.clamp_min(1.0), size_h.clamp_min(1.0)
    if sampling_ratio > 0:
        grid_h = grid_w = Tensor.full([regions], float(sampling_ratio), x.device, bn.float32)
        most_h = most_w = sampling_ratio
    else:
        grid_h, grid_w = (size_h / output_height).ceil(), (size_w / output_width).ceil()
        most_h, most_w = max(int(host(grid_h).max()), 1), max(int(host(grid_w).max()), 1)
    ys = _bin_samples(start_h, size_h, output_height, grid_h, most_h)  # [R, oh, gh]
    xs = _bin_samples(start_w, size_w, output_width, grid_w, most_w)  # [R, ow, gw]
    y_index, y_weight, y_inside = _bilinear_taps(ys, height)
    x_index, x_weight, x_inside = _bilinear_taps(xs, width)
    shape = [regions, output_height, output_width, most_h, most_w]

    def grid(t: Tensor, dim: str) -> Tensor:  # [R, oh, gh] or [R, ow, gw] onto shape
        view = [regions, output_height, 1, most_h, 1] if dim == "y" else \
            [regions, 1, output_width, 1, most_w]
        return t.reshape(view).expand(shape)

    real_h = Tensor.arange(0, most_h, device=x.device).cast(bn.float32).reshape([1, -1]) < \
        grid_h.reshape([-1, 1])
    real_w = Tensor.arange(0, most_w, device=x.device).cast(bn.float32).reshape([1, -1]) < \
        grid_w.reshape([-1, 1])
    real = grid(real_h.reshape([regions, 1, most_h]).expand([regions, output_height, most_h]),
                "y") & grid(real_w.reshape([regions, 1, most_w]).expand(
                    [regions, output_width, most_w]), "x")
    inside = grid(y_inside, "y") & grid(x_inside, "x")
    points = output_height * output_width * most_h * most_w
    planes = x.reshape([n, channels, height * width]).select(0, batch_indices.cast(bn.int64))
    taps = []
    for yi, yw in zip(y_index, y_weight):
        for xi, xw in zip(x_index, x_weight):
            index = (grid(yi, "y") * width + grid(xi, "x")).reshape([regions, 1, points])
            value = planes.gather(2, index.expand([regions, channels, points]))
            weight = (grid(yw, "y") * grid(xw, "x") * inside.cast(bn.float32))
            taps.append(value * weight.reshape([regions, 1, points]).cast(x.dtype))
    real = real.reshape([regions, 1, points])
    if mode == "max":
        best = taps[0]
        for tap in taps[1:]:
            best = best.maximum(tap)
        best = best.mask_fill(~real.expand(list(best.shape)), -math.inf)
        out = best.reshape([regions, channels, output_height, output_width, -1]).max(4)
    else:
        total = taps[0] + taps[1] + taps[2] + taps[3]
        total = total.mask_fill(~real.expand(list(total.shape)), 0.0)
        count = (grid_h * grid_w).clamp_min(1.0).reshape([regions, 1, 1, 1]).cast(x.dtype)
        out = total.reshape([regions, channels, output_height, output_width, -1]).sum(4) / count
    return out.reshape([regions, channels, output_height, output_width])

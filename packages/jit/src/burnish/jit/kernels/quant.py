"""Quantized products on integers: two 8-bit operands multiplied four bytes at a time, the
int32 sums turned into the product of the dequantized values in the product kernel's epilogue.

``lhs`` ``[..., M, K]`` int8 or uint8 per tensor or per row (a channel axis of ``-2``) times
``rhs`` ``[K, N]`` int8 or uint8 per tensor or per column (axis 1), symmetric or affine. Both
operands become words of four bytes along ``K`` (byte ``j`` of a word in bits ``8j`` to
``8j + 7``, zeros past ``K``): uint8 values shifted to int8 (``q - 128``, their zero points
with them), so that a word's product with another is the dot product of four signed bytes
(``dot4I8Packed`` in WGSL where naga has it, ``__dp4a`` in CUDA C, shifts elsewhere). The
weights (``rhs``) are packed once per buffer (``per_buffer``: a quantized layer's weights are
constants) into ``[N, ceil(K / 4)]`` words, each column's sum of its shifted values after
them; ``lhs`` is packed at every product into ``[rows, ceil(K / 4)]`` words, each row's sum
after them when the weights have zero points, or read where it lies where its bytes already
are such words (``words_in_place``: int8 rows of whole words, no row sums wanted, on a
runtime that stores int8 a byte an element). Then ``kernels.matmul``'s kernels (tiled, plain
or split, the tile shape tuned as for float products) multiply the words, and the epilogue
applies the zero points and the scales:

    sum_k (a - za)(b - zb) = sum_k a b - zb sum_k a - za sum_k b + K za zb

The corrections are summed in wrapping 32-bit arithmetic: the result, the one value that
matters, is exact wherever it fits int32, which ``inner_limit`` bounds ``K`` for. The float
result is ``float32(sum) * (scale_a * scale_b)``, stored as float16 where that is the dtype
asked for (rounded once), else as float32.
"""

from __future__ import annotations

from dataclasses import dataclass

from burnish.backend.quant_ops import QuantizedPrimitive, byte_operands
from burnish.dtype import DType, float16, float32, int32
from burnish.jit import autotune, ir
from burnish.jit.builder import KernelBuilder
from burnish.jit.kernels import matmul as mm
from burnish.jit.kernels.elementwise import plain
from burnish.jit.tensor import JitTensor, numel, per_buffer
from burnish.quantization.scheme import PerChannel

#: The longest inner dim of any product taken: 131071 terms of at most ``128 * 128`` (two
#: shifted bytes) sum exactly in int32. ``inner_limit`` bounds it further for zero points.
MAX_INNER = (2**31 - 1) // (128 * 128)
#: Bytes a word holds.
WORD = 4
#: Invocations of a packing workgroup (one workgroup packs one row).
PACK_WORKGROUP = 64
#: The most buffers the product kernel binds (the output, the two word matrices, two scales
#: and two zero points); runtimes that bind fewer keep the default.
BUFFERS = 7
#: The most elements (or words) one buffer of these kernels holds: they index in int32.
MAX_ELEMENTS = 2**31 - 1

# The product's info words after kernels.matmul's (which take BATCH_AT words: no batch dims).
INNER_ROWS, SA_OFF, SB_OFF, ZA_OFF, ZB_OFF, INNER, ROW_SUMS, COL_SUMS = range(
    mm.BATCH_AT, mm.BATCH_AT + 8)
# The packing kernel's info words.
P_ROWS, P_COLS, P_WORDS, P_OFFSET, P_ROW_STRIDE, P_COL_STRIDE = range(6)


def inner_limit(lhs: QuantizedPrimitive, rhs: QuantizedPrimitive) -> int:
    """The longest ``K`` whose result ``sum_k (a - za)(b - zb)`` always fits int32: a shifted
    byte minus a shifted zero point is at most 255 in magnitude, at most 128 without one."""
    a = 255 if lhs.zero_points is not None else 128
    b = 255 if rhs.zero_points is not None else 128
    return min(MAX_INNER, (2**31 - 1) // (a * b))


def takes(lhs: object, rhs: object) -> bool:
    """Whether ``lhs @ rhs`` runs on the integer kernels (the module's docstring says which
    operands): both quantized on one runtime that binds ``BUFFERS`` buffers, ``K`` within
    ``inner_limit``, every buffer within ``MAX_ELEMENTS``."""
    if not byte_operands(lhs, rhs, MAX_INNER):
        return False
    assert isinstance(lhs, QuantizedPrimitive) and isinstance(rhs, QuantizedPrimitive)
    values, weights = lhs.values, rhs.values
    if not isinstance(values, JitTensor) or not isinstance(weights, JitTensor):
        return False
    runtime = values.runtime
    if weights.runtime is not runtime or runtime.max_buffers < BUFFERS:
        return False
    k, n = rhs.shape
    if k > inner_limit(lhs, rhs):
        return False
    rows = numel(lhs.shape[:-1])
    words = -(-k // WORD)
    largest = max(rows * k, k * n, rows * n, rows * (words + 1), n * (words + 1))
    return largest <= MAX_ELEMENTS


def quantized_matmul(lhs: QuantizedPrimitive, rhs: QuantizedPrimitive, dtype: DType
                     ) -> JitTensor:
    """``lhs @ rhs`` of two operands ``takes`` accepts, as a new plain tensor of float16 where
    ``dtype`` is float16, else of float32 (the caller casts to other float dtypes)."""
    values: JitTensor = lhs.values
    runtime = values.runtime
    k, n = rhs.shape
    rows = numel(lhs.shape[:-1])
    a_shift = 128 if lhs.scheme.value == "uint8" else 0
    b_shift = 128 if rhs.scheme.value == "uint8" else 0
    weights = packed_weights(rhs)
    a = values if values.ndim == 2 else plain(values)
    if a.ndim != 2:
        a = a.view((rows, k), (k, 1), a.offset)
    row_sums = rhs.zero_points is not None
    lhs_words = None if row_sums or lhs.scheme.value != "int8" else words_in_place(a)
    if lhs_words is None:
        lhs_words = pack(a, a_shift, row_sums)
    words = lhs_words.shape[1]
    out_dtype = float16 if dtype is float16 else float32
    out = _alloc(values, (*lhs.shape[:-1], n), out_dtype)

    sa, sb = plain(lhs.scales), plain(rhs.scales)
    za = None if lhs.zero_points is None else plain(lhs.zero_points)
    zb = None if rhs.zero_points is None else plain(rhs.zero_points)
    epilogue = QuantEpilogue(Params(
        out_dtype.name, sa.dtype.name, sb.dtype.name, None if za is None else za.dtype.name,
        None if zb is None else zb.dtype.name, isinstance(lhs.scheme.granularity, PerChannel),
        isinstance(rhs.scheme.granularity, PerChannel), a_shift, b_shift))
    # The words of b read as [K / 4, N]: column n's words lie together.
    b_words = weights.view((words, n), (1, words), 0)
    layout = mm.Layout(lhs_words, b_words, ())
    layout.info += [lhs.shape[-2] if len(lhs.shape) >= 2 else 1, sa.offset, sb.offset,
                    0 if za is None else za.offset, 0 if zb is None else zb.offset, k,
                    rows * words, n * words]
    buffers = [out.buffer, lhs_words.buffer, weights.buffer, sa.buffer, sb.buffer]
    buffers += [t.buffer for t in (za, zb) if t is not None]

    def run(name: str | None = None) -> None:
        """Launch the product's kernel (the tiled one with tiling ``name``)."""
        if name is not None:
            layout.tile(mm._BY_NAME[name])
        runtime.launch(("int8_words_matmul", epilogue.params, *layout.key()),
                       lambda: layout.kernel(epilogue), buffers, layout.info,
                       groups=layout.workgroups())

    if not layout.tiled:
        run()
        return out
    flags = "".join("1" if unit else "s" for unit in layout.base[2])
    key = f"quant_matmul/{flags}/{autotune.shape_class(1, rows, n, words)}"
    run(autotune.choose(runtime.device_name, key, mm._candidates(rows, n), run, runtime.sync))
    return out


@dataclass(frozen=True)
class Params:
    """What a product kernel's epilogue is compiled for: the dtypes of the output, the scales
    and the zero points (None: the operand has none), whether each operand's parameters are
    per channel (per row of ``lhs``, per column of ``rhs``), and the shifts of uint8 values."""

    out: str
    sa: str
    sb: str
    za: str | None
    zb: str | None
    a_channel: bool
    b_channel: bool
    a_shift: int
    b_shift: int


class QuantEpilogue(mm.Epilogue):
    """The product kernels' side of a quantized product: word operands multiplied as four
    bytes, and each int32 sum corrected for the zero points, scaled and stored (the module's
    docstring has the formula). Binds the output, the words of ``a`` and ``b`` (the sums of
    their rows and columns after the words), the scales and the zero points, in that order."""

    def __init__(self, params: Params):
        self.params = params

    def declare(self, k: KernelBuilder, dtype: str, has_bias: bool) -> tuple[ir.Buffer, ...]:
        p = self.params
        self.out = k.buffer("out", p.out, writable=True)
        self.a, self.b = k.buffer("a", "int32"), k.buffer("b", "int32")
        self.sa, self.sb = k.buffer("sa", p.sa), k.buffer("sb", p.sb)
        self.za = None if p.za is None else k.buffer("za", p.za)
        self.zb = None if p.zb is None else k.buffer("zb", p.zb)
        return self.a, self.b

    def multiply(self, a: ir.Expr, b: ir.Expr) -> ir.Expr:
        return ir.call("dot4i8", a, b)

    def store(self, k: KernelBuilder, acc: ir.Expr, batch: ir.Expr, row: ir.Expr,
              col: ir.Expr, index: ir.Expr) -> None:
        p = self.params
        a_at = k.let(row % k.info(INNER_ROWS) if p.a_channel else ir.lift(0, "i32"), "qa")
        b_at = col if p.b_channel else ir.lift(0, "i32")
        value = acc
        if self.za is not None or self.zb is not None:
            # Wrapping arithmetic (u32): the terms may pass int32's range, the result does not.
            total = k.let(acc.bitcast("u32"), "qs", "u32")
            za = zb = None
            if self.za is not None:
                za = k.let(self.za[k.info(ZA_OFF) + a_at] - p.a_shift, "za")
                column_sum = self.b[k.info(COL_SUMS) + col]
                k.assign(total, total - za.bitcast("u32") * column_sum.bitcast("u32"))
            if self.zb is not None:
                zb = k.let(self.zb[k.info(ZB_OFF) + b_at] - p.b_shift, "zb")
                row_sum = self.a[k.info(ROW_SUMS) + row]
                k.assign(total, total - zb.bitcast("u32") * row_sum.bitcast("u32"))
            if za is not None and zb is not None:
                k.assign(total, total + k.info(INNER).bitcast("u32") * za.bitcast("u32")
                         * zb.bitcast("u32"))
            value = total.bitcast("i32")
        scale = self.sa[k.info(SA_OFF) + a_at] * self.sb[k.info(SB_OFF) + b_at]
        k.store(self.out, k.info(mm.OUT_OFF) + index, scale * value.cast("f32"))


def words_in_place(a: JitTensor) -> JitTensor | None:
    """The int8 ``[rows, K]`` ``a`` read as int32 words ``[rows, K / 4]`` where it lies, on a
    runtime whose int8 buffers are such words (``Runtime.byte_words``) when its rows are
    whole words: contiguous, ``K``, the row stride and the start multiples of 4; else
    None."""
    rows, cols = a.shape
    row_stride, col_stride = a.strides
    if not a.runtime.byte_words or a.dtype.name != "int8":
        return None
    if col_stride != 1 or cols % WORD or row_stride % WORD or a.offset % WORD:
        return None
    return JitTensor(a.buffer, (rows, cols // WORD), int32, a.device, a.runtime,
                     (row_stride // WORD, 1), a.offset // WORD)


def packed_weights(rhs: QuantizedPrimitive) -> JitTensor:
    """``rhs``'s values as int32 words ``[N, ceil(K / 4)]`` (``pack`` of its transpose) with
    each column's sum after them, made once per buffer and layout."""
    values: JitTensor = rhs.values
    shift = 128 if rhs.scheme.value == "uint8" else 0
    # Row n of the words is column n of the weights: rows step by the column stride.
    columns = values.view((values.shape[1], values.shape[0]),
                          (values.strides[1], values.strides[0]), values.offset)
    return per_buffer(values, "jit int8 words", lambda: pack(columns, shift, True))


def pack(src: JitTensor, shift: int, sums: bool) -> JitTensor:
    """The int8 or uint8 ``[rows, cols]`` ``src`` (any strides) as int32 words ``[rows,
    ceil(cols / 4)]``: four values a word, each minus ``shift``, zeros past ``cols``; with
    ``sums``, each row's sum of the shifted values follows the words in the buffer (the
    tensor's shape covers the words alone)."""
    rows, cols = src.shape
    words = -(-cols // WORD)
    out = _alloc(src, (rows, words), int32, extra=rows if sums else 0)
    info = [rows, cols, words, src.offset, src.strides[0], src.strides[1]]
    src.runtime.launch(("int8_words_pack", src.dtype.name, shift, sums),
                       lambda: _pack_kernel(src.dtype.name, shift, sums),
                       [out.buffer, src.buffer], info, groups=rows)
    return out


def _pack_kernel(dtype: str, shift: int, sums: bool) -> ir.Kernel:
    """One workgroup a row: each invocation packs every ``PACK_WORKGROUP``-th word of it, and
    with ``sums`` the workgroup adds up the row's shifted values."""
    k = KernelBuilder("int8_words_pack", (PACK_WORKGROUP, 1, 1))
    out = k.buffer("out", "int32", writable=True)
    src = k.buffer("src", dtype)
    rows, cols, words = (k.let(k.info(w), name) for w, name in
                         ((P_ROWS, "rows"), (P_COLS, "cols"), (P_WORDS, "words")))
    group = k.group_index()
    # No early return: every invocation reaches the barriers; workgroups past the last row
    # (a grid split over y) pack the last row again and store nothing.
    row = k.let(ir.select(group < rows, group, rows - 1), "row")
    t = k.let(k.local_id(0), "t")
    base = k.let(k.info(P_OFFSET) + row * k.info(P_ROW_STRIDE), "base")
    step = k.let(k.info(P_COL_STRIDE), "cs")
    total = k.let(0, "sum")
    with k.for_(t, words, PACK_WORKGROUP, name="q") as q:
        word = k.let(ir.lift(0, "u32"), "word", "u32")
        for j in range(WORD):
            col = k.let(q * WORD + j, "c")
            inside = k.let(col < cols, "in")
            loaded = src[ir.select(inside, base + col * step, base)]
            value = k.let(ir.select(inside, loaded - shift if shift else loaded, 0), "x")
            byte = (value & 255).cast("u32")
            k.assign(word, word | (byte << (8 * j) if j else byte))
            k.assign(total, total + value)
        with k.if_(group < rows):
            k.store(out, row * words + q, word.bitcast("i32"))
    if sums:
        mm.shared_sum(k, k.shared("i32", PACK_WORKGROUP), t, t, total, PACK_WORKGROUP)
        with k.if_(t.eq(0).and_(group < rows)):
            k.store(out, rows * words + row, total)
    return k.build()


def _alloc(like: JitTensor, shape: tuple[int, ...], dtype: DType, extra: int = 0
           ) -> JitTensor:
    """A new plain tensor of ``shape`` on ``like``'s device, its buffer ``extra`` elements
    longer."""
    runtime = like.runtime
    itemsize = runtime.generator.storage_numpy(dtype.name).itemsize
    buffer = runtime.pool.alloc(max(numel(shape) + extra, 1) * itemsize)
    return JitTensor(buffer, shape, dtype, like.device, runtime)

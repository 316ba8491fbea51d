"""What NVIDIA's own library gives an int8 product against float16 on this GPU: cuBLASLt's int8
(int32 accumulation, Tensor Cores) and float16 products of ``[M, 4096] @ [4096, 4096]``, every
algorithm its heuristic offers timed on the GPU (CUDA events around 50 calls back to back,
the best of 3), with ``torch._int_mm`` and torch's float16 product beside them. The reference
for burnish's int8 goal on cuda (bench_quant.py): how fast an int8 product of this shape can be
made with the vendor's kernels.

    python bench/cublaslt_int8.py              # M = 256 and 1024
    python bench/cublaslt_int8.py --rows 256
    python bench/cublaslt_int8.py --rows 256 --split-k 2 4 8   # each algorithm split along k too

Needs CuPy and PyTorch with CUDA (the library is loaded from PyTorch's wheel or the CUDA
toolkit); burnish itself is not used.
"""

from __future__ import annotations

import argparse
import ctypes
import glob
import os

# cudaDataType, cublasComputeType_t, cublasLtMatmulDescAttributes_t, cublasOperation_t
R_16F, R_8I, R_32I, R_32F = 2, 3, 10, 0
COMPUTE_32F, COMPUTE_32I = 68, 72
TRANSA, TRANSB = 3, 4
OP_N, OP_T = 0, 1
PREF_MAX_WORKSPACE = 1
WORKSPACE = 32 << 20
# cublasLtMatmulAlgoConfigAttributes_t, cublasLtReductionScheme_t
CONFIG_SPLITK_NUM, CONFIG_REDUCTION_SCHEME = 2, 3
REDUCTION_SCHEMES = {"in place": 1, "compute type": 2, "output type": 4}


class Heuristic(ctypes.Structure):
    """cublasLtMatmulHeuristicResult_t."""

    _fields_ = [("algo", ctypes.c_uint64 * 8), ("workspace", ctypes.c_size_t),
                ("state", ctypes.c_int), ("waves", ctypes.c_float),
                ("reserved", ctypes.c_int * 4)]


def library() -> ctypes.CDLL:
    import torch

    here = os.path.dirname(torch.__file__)
    found = sorted(glob.glob(os.path.join(here, "..", "nvidia", "*", "lib", "libcublasLt.so*"))
                   + glob.glob(os.path.join(here, "..", "nvidia", "cublas", "lib",
                                            "libcublasLt.so*"))
                   + glob.glob("/usr/local/cuda*/lib64/libcublasLt.so*"))
    for path in reversed(found):
        try:
            return ctypes.CDLL(path)
        except OSError:
            continue
    raise SystemExit("no libcublasLt found (PyTorch's CUDA wheels or the CUDA toolkit)")


def check(status: int, what: str) -> None:
    if status != 0:
        raise RuntimeError(f"{what}: cuBLAS status {status}")


def gpu_us(call, cp) -> float:
    call()
    cp.cuda.Device().synchronize()
    start, end = cp.cuda.Event(), cp.cuda.Event()
    best = float("inf")
    for _ in range(3):
        start.record()
        for _ in range(50):
            call()
        end.record()
        end.synchronize()
        best = min(best, cp.cuda.get_elapsed_time(start, end) * 1000 / 50)
    return best


def products(lt, handle, m: int, n: int, k: int, kind: str, count: int = 16,
             splits: tuple[int, ...] = ()) -> list[tuple]:
    """Every heuristic algorithm of one product ``D [m, n] = B [m, k] @ A [n, k]^T`` (the
    "TN" layout cuBLAS's int8 kernels want), and each also split in ``splits`` parts along k
    with every reduction scheme cuBLASLt accepts for it: (name, GPU us or None, note)."""
    import cupy as cp

    c = ctypes
    if kind == "int8":
        a_type, d_type, compute, scale = R_8I, R_32I, COMPUTE_32I, R_32I
        a = cp.random.randint(-127, 127, (n, k), dtype=cp.int8)
        b = cp.random.randint(-127, 127, (m, k), dtype=cp.int8)
        d = cp.empty((m, n), dtype=cp.int32)
        alpha, beta = c.c_int32(1), c.c_int32(0)
    else:
        a_type, d_type, compute, scale = R_16F, R_16F, COMPUTE_32F, R_32F
        a = cp.random.standard_normal((n, k), dtype=cp.float32).astype(cp.float16)
        b = cp.random.standard_normal((m, k), dtype=cp.float32).astype(cp.float16)
        d = cp.empty((m, n), dtype=cp.float16)
        alpha, beta = c.c_float(1), c.c_float(0)
    desc = c.c_void_p()
    check(lt.cublasLtMatmulDescCreate(c.byref(desc), compute, scale), "desc")
    op_t, op_n = c.c_int(OP_T), c.c_int(OP_N)
    check(lt.cublasLtMatmulDescSetAttribute(desc, TRANSA, c.byref(op_t), 4), "transa")
    check(lt.cublasLtMatmulDescSetAttribute(desc, TRANSB, c.byref(op_n), 4), "transb")
    layouts = [c.c_void_p() for _ in range(3)]
    for layout, (dtype, rows, cols, ld) in zip(layouts, ((a_type, k, n, k), (a_type, k, m, k),
                                                         (d_type, n, m, n))):
        check(lt.cublasLtMatrixLayoutCreate(c.byref(layout), dtype, c.c_uint64(rows),
                                            c.c_uint64(cols), c.c_int64(ld)), "layout")
    la, lb, ld_ = layouts
    preference = c.c_void_p()
    check(lt.cublasLtMatmulPreferenceCreate(c.byref(preference)), "preference")
    size = c.c_uint64(WORKSPACE)
    check(lt.cublasLtMatmulPreferenceSetAttribute(preference, PREF_MAX_WORKSPACE, c.byref(size),
                                                  8), "workspace")
    workspace = cp.empty(WORKSPACE, dtype=cp.uint8)
    found = (Heuristic * count)()
    got = c.c_int()
    check(lt.cublasLtMatmulAlgoGetHeuristic(handle, desc, la, lb, ld_, ld_, preference, count,
                                            found, c.byref(got)), "heuristic")
    stream = c.c_void_p(cp.cuda.get_current_stream().ptr)
    results = []
    candidates = [(str(i), found[i]) for i in range(got.value)]
    for i in range(got.value):
        for parts in splits:
            for scheme_name, scheme in REDUCTION_SCHEMES.items():
                h = Heuristic()
                c.memmove(c.byref(h), c.byref(found[i]), c.sizeof(Heuristic))
                value, mode = c.c_uint32(parts), c.c_uint32(scheme)
                if (lt.cublasLtMatmulAlgoConfigSetAttribute(c.byref(h.algo), CONFIG_SPLITK_NUM,
                                                            c.byref(value), 4)
                        or lt.cublasLtMatmulAlgoConfigSetAttribute(
                            c.byref(h.algo), CONFIG_REDUCTION_SCHEME, c.byref(mode), 4)):
                    continue
                checked = Heuristic()
                if lt.cublasLtMatmulAlgoCheck(handle, desc, la, lb, ld_, ld_, c.byref(h.algo),
                                              c.byref(checked)):
                    continue  # this algorithm cannot be split so, or not with this scheme
                if checked.workspace > WORKSPACE:
                    continue
                h.workspace = checked.workspace
                candidates.append((f"{i}, split {parts}, {scheme_name}", h))
    for i, h in candidates:

        def call(h=h):
            check(lt.cublasLtMatmul(handle, desc, c.byref(alpha), c.c_void_p(a.data.ptr), la,
                                    c.c_void_p(b.data.ptr), lb, c.byref(beta),
                                    c.c_void_p(d.data.ptr), ld_, c.c_void_p(d.data.ptr), ld_,
                                    c.byref(h.algo), c.c_void_p(workspace.data.ptr),
                                    c.c_size_t(h.workspace), stream), "matmul")
        try:
            us = gpu_us(call, cp)
        except RuntimeError as error:
            results.append((i, None, str(error)))
            continue
        note = f"workspace {h.workspace} B, waves {h.waves:.2f}"
        if kind == "int8":
            want = b[:64].astype(cp.int64) @ a.astype(cp.int64).T
            note += ", exact" if bool((d[:64] == want).all()) else ", WRONG"
        results.append((i, us, note))
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, nargs="+", default=[256, 1024])
    parser.add_argument("--features", type=int, default=4096)
    parser.add_argument("--split-k", type=int, nargs="*", default=[],
                        help="also time each algorithm split along k in these many parts")
    args = parser.parse_args()
    import cupy as cp
    import torch

    lt = library()
    handle = ctypes.c_void_p()
    check(lt.cublasLtCreate(ctypes.byref(handle)), "create")
    n = k = args.features
    print(f"GPU: {torch.cuda.get_device_name()}, torch {torch.__version__}, CuPy {cp.__version__}")
    for m in args.rows:
        print(f"\n## [{m}, {k}] @ [{k}, {n}]: GPU us per call")
        for kind in ("int8", "float16"):
            for i, us, note in products(lt, handle, m, n, k, kind,
                                        splits=tuple(args.split_k)):
                print(f"| cuBLASLt {kind} algorithm {i} | "
                      f"{'failed' if us is None else f'{us:.2f}'} | {note} |")
        x = torch.randint(-127, 127, (m, k), dtype=torch.int8, device="cuda")
        w = torch.randint(-127, 127, (n, k), dtype=torch.int8, device="cuda").t()
        xh, wh = x.half(), w.half()
        for name, fn in (("torch._int_mm", lambda x=x, w=w: torch._int_mm(x, w)),
                         ("torch float16", lambda xh=xh, wh=wh: xh @ wh)):
            print(f"| {name} | {gpu_us(fn, cp):.2f} | |")


if __name__ == "__main__":
    main()

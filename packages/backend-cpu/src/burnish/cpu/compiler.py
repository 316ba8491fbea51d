"""The system's C compiler, run once per kernel source; shared libraries cached on disk.

A kernel's library is named by a hash of its source, the compiler's version and the flags, under
``$BURNISH_CACHE_DIR/cpu-kernels/`` (default ``~/.cache/burnish``), so a second process (and a
second run of a training script) loads what the first compiled. Files are written under a
temporary name and renamed into place: a reader never sees half a library.
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import os
import platform
import shutil
import subprocess
import tempfile
from pathlib import Path

from burnish.cpu.threads import Threads, pool

#: Flags of every kernel: optimised for this machine's CPU (its vector width), math functions
#: free of errno. (Not -fwrapv: it keeps the compiler from vectorizing loops whose addresses
#: are int32 arithmetic, which every kernel's are.)
FLAGS = ("-O3", "-march=native", "-std=gnu11", "-fPIC", "-shared", "-fno-math-errno", "-w")


def _vector_probe() -> str:
    from burnish.jit.codegen.cpu import VECTOR_MATH, vector_math_declarations

    calls = " + ".join(f"{fn}f(x[i]) + (float){fn}((double)x[i])" for fn in VECTOR_MATH)
    return ("#include <math.h>\n" + vector_math_declarations()
            + "void burnish_probe(float* restrict y, const float* restrict x, int n) {\n"
            + f"    for (int i = 0; i < n; i++) y[i] = {calls};\n}}\n")


_VECTOR_PROBE = _vector_probe()


class CompilerMissing(RuntimeError):
    """No working C compiler: the cpu backend has no device."""


def cache_dir() -> Path:
    root = os.environ.get("BURNISH_CACHE_DIR") or Path.home() / ".cache" / "burnish"
    return Path(root) / "cpu-kernels"


class Compiler:
    """``$CC`` (else ``cc``, ``gcc``, ``clang``), with OpenMP's ``simd`` pragmas where it
    takes them."""

    def __init__(self) -> None:
        found = [c for c in (os.environ.get("CC"), "cc", "gcc", "clang") if c]
        path = next((p for p in map(shutil.which, found) if p), None)
        if path is None:
            raise CompilerMissing(
                "cpu backend: no C compiler found (tried "
                + ", ".join(found) + "); install gcc or clang, or set CC")
        self.path = path
        try:
            version = subprocess.run([path, "--version"], capture_output=True, text=True,
                                     timeout=30, check=True).stdout.splitlines()[0]
        except (OSError, subprocess.SubprocessError, IndexError) as error:
            raise CompilerMissing(f"cpu backend: {path} --version failed ({error})") from None
        self.version = version.strip()
        self.flags: tuple[str, ...] = FLAGS
        #: Whether the compiler honours OpenMP's ``simd`` pragmas (``-fopenmp-simd``: vector
        #: loops and reductions, no OpenMP runtime; the threads are ``burnish.cpu.threads``).
        self.simd = False
        self.vector_math = False
        try:
            self.build("void burnish_probe(float *x, int n) {\n#pragma omp simd\n"
                       "for (int i = 0; i < n; i++) x[i] += 1;\n}\n", ("-fopenmp-simd",))
            self.simd = True
            self.flags = FLAGS + ("-fopenmp-simd",)
        except (RuntimeError, OSError):
            try:
                self.build("void burnish_probe(void) {}\n", ())
            except (RuntimeError, OSError) as error:
                raise CompilerMissing(f"cpu backend: {path} cannot build a shared library: "
                                      f"{error}") from None
            return
        # glibc's vector math (libmvec), for loops that call exp, erf, tanh...
        try:
            probe = self.build(_VECTOR_PROBE, ("-fopenmp-simd", "-lmvec"))
        except (RuntimeError, OSError):
            return
        self.vector_math = hasattr(probe, "burnish_probe")
        if self.vector_math:
            self.flags += ("-lmvec",)

    @functools.cached_property
    def target(self) -> str:
        """What ``-march=native`` means here, for the cache key."""
        model = ""
        try:
            for line in Path("/proc/cpuinfo").read_text().splitlines():
                if line.startswith(("model name", "flags", "Features")):
                    model += line
        except OSError:
            model = platform.processor()
        return f"{platform.machine()} {model}"

    def build(self, source: str, extra: tuple[str, ...] | None = None) -> ctypes.CDLL:
        """The loaded shared library of ``source``, compiled or found in the cache."""
        flags = self.flags if extra is None else FLAGS + extra
        key = hashlib.sha256("\0".join((source, self.version, self.target, *flags))
                             .encode()).hexdigest()[:32]
        directory = cache_dir()
        library = directory / f"{key}.so"
        if not library.exists():
            directory.mkdir(parents=True, exist_ok=True)
            with tempfile.TemporaryDirectory(dir=directory) as tmp:
                c_file = Path(tmp) / "kernel.c"
                c_file.write_text(source)
                built = Path(tmp) / "kernel.so"
                result = subprocess.run([self.path, *flags, str(c_file), "-o", str(built),
                                         "-lm"], capture_output=True, text=True, timeout=600)
                if result.returncode:
                    raise RuntimeError(f"{self.path} could not compile a kernel:\n"
                                       f"{result.stderr.strip()}\n--- source ---\n{source}")
                os.replace(built, library)
        loaded = ctypes.CDLL(str(library))
        if hasattr(loaded, "burnish_threads_attach"):  # its parallel loops: on the pool
            self.threads.attach(loaded)
        return loaded

    @functools.cached_property
    def threads(self) -> Threads:
        """The process's thread pool (``burnish.cpu.threads``), started at the first use."""
        return pool(lambda source: self.build(source, ("-pthread",)))

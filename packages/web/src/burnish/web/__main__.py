"""``python -m burnish.web export MODEL_RECORD --model FILE.py:NAME --input 1,1,28,28 --out DIR``:
a saved module exported for the browser (see ``burnish.web.export``)."""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import sys
from pathlib import Path
from typing import Any

import numpy as np

import burnish as bn
from burnish.web.export import ExportError, export

#: The dtypes ``--input`` takes after its shape (``2,16:int64``: token ids).
INPUT_DTYPES = ("float32", "int32", "int64")


def shape(text: str) -> tuple[int, ...] | np.ndarray:
    """``1,1,28,28`` (a float32 input: random values are drawn) or ``2,16:int64`` (an int
    input: zeros, valid ids for any embedding)."""
    dims_text, _, dtype = text.partition(":")
    try:
        dims = tuple(int(d) for d in dims_text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"an input shape is positive ints separated by commas "
                                         f"(1,1,28,28), optionally with a dtype (2,16:int64); "
                                         f"got {text!r}") from None
    if not dims or min(dims) <= 0:
        raise argparse.ArgumentTypeError(f"an input shape's dims must be positive; got {text!r}")
    if dtype and dtype not in INPUT_DTYPES:
        raise argparse.ArgumentTypeError(f"an input's dtype is one of {', '.join(INPUT_DTYPES)};"
                                         f" got {dtype!r}")
    if dtype in ("int32", "int64"):
        return np.zeros(dims, dtype)
    return dims


def resolve(spec: str) -> Any:
    """``FILE.py:NAME`` or ``package.module:NAME``: the object named."""
    where, _, name = spec.rpartition(":")
    if not where or not name:
        raise ExportError(f"--model must be FILE.py:NAME or package.module:NAME; got {spec!r}")
    if where.endswith(".py"):
        path = Path(where)
        if not path.is_file():
            raise ExportError(f"--model: no file {path}")
        sys.path.insert(0, str(path.resolve().parent))  # the file's own imports (model.py's)
        loaded = importlib.util.spec_from_file_location(path.stem, path)
        module = importlib.util.module_from_spec(loaded)  # type: ignore[arg-type]
        loaded.loader.exec_module(module)  # type: ignore[union-attr]
    else:
        module = importlib.import_module(where)
    try:
        return getattr(module, name)
    except AttributeError:
        raise ExportError(f"--model: {where} has no {name!r}") from None


def build(factory: Any, device: Any) -> Any:
    """The module ``factory`` makes on ``device``: a config class (``init(device)``), a config,
    or a function of the device that returns a module or a config."""
    made = factory() if isinstance(factory, type) else factory
    if not hasattr(made, "init") and callable(made):
        made = made(device)
    if hasattr(made, "init") and not hasattr(made, "named_params"):
        made = made.init(device)
    if not hasattr(made, "load"):
        raise ExportError(f"--model must name a config class, a config or a function of a "
                          f"device that makes a module; it made {type(made).__name__}")
    return made


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m burnish.web", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    command = commands.add_parser("export", help="export a saved module for the browser")
    command.add_argument("record", type=Path, help="the module's record (model.safetensors)")
    command.add_argument("--model", required=True,
                         help="what makes the module: FILE.py:NAME or package.module:NAME, a "
                              "config class, a config or a function of a device")
    command.add_argument("--input", type=shape, action="append", required=True,
                         help="an input's shape (1,1,28,28), with its dtype for int inputs "
                              "(2,16:int64, token ids); once per input")
    command.add_argument("--out", type=Path, required=True, help="the folder to write")
    command.add_argument("--device", default="wgpu",
                         help="the wgpu device to record on: wgpu (the default adapter) or "
                              "wgpu:N")
    args = parser.parse_args(argv)
    try:
        if not args.record.is_file():
            raise ExportError(f"no record at {args.record}")
        name, _, index = args.device.partition(":")
        backend = bn.backend(name)
        device = backend.devices()[int(index)] if index else backend.default_device()
        model = build(resolve(args.model), device).load(args.record)
        done = export(model, args.input, args.out, device=device)
    except ExportError as error:
        print(f"burnish.web: {error}", file=sys.stderr)
        return 2
    print(f"exported {done.launches} launches of {len(done.kernels)} kernels to {done.path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""``python -m burnish.onnx MODEL.onnx --out DIR``: write the model as a burnish module and its
weights, and report the operators it uses."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from burnish.onnx.errors import OnnxImportError, UnsupportedOperatorError
from burnish.onnx.importer import generate, survey


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m burnish.onnx", description=__doc__)
    parser.add_argument("model", type=Path, help="the .onnx file")
    parser.add_argument("--out", type=Path, required=True, help="folder to write into")
    parser.add_argument("--name", default=None,
                        help="name of the module and weights files (default: the model's)")
    parser.add_argument("--format", default=None,
                        help="record format of the weights: safetensors (default), mpk, json, "
                             "bin")
    args = parser.parse_args(argv)
    name = args.name or args.model.stem.replace("-", "_").replace(".", "_")
    try:
        imported = generate(args.model, args.out, name, args.format)
    except OnnxImportError as error:
        if isinstance(error, UnsupportedOperatorError):
            report_operators(args.model)
        # One line naming the file once: errors about the file itself already start with it.
        print(f"error: {error}" if error.file is not None else f"error: {args.model}: {error}",
              file=sys.stderr)
        return 1
    extension = args.format or "safetensors"
    print(f"wrote {args.out / (name + '.py')} and {args.out / (name + '.' + extension)}")
    print(f"{sum(imported.report.operators.values())} nodes, "
          f"{len(imported.report.operators)} operators, "
          f"{sum(p.size for p in imported.weights.values())} parameters")
    print(imported.report.table())
    print("unsupported operators: none")
    return 0


def report_operators(model: Path) -> None:
    """Print every operator of the model with its node count, and those unsupported."""
    try:
        counts, missing = survey(model)
    except OnnxImportError:
        return  # the error printed next says why
    for op, count in sorted(counts.items()):
        print(f"{op:28} {count:>5}  {'UNSUPPORTED' if op in missing else ''}".rstrip())
    if missing:
        listing = ", ".join(f"{op} (node {node!r})" for op, node in sorted(missing.items()))
        print(f"unsupported operators: {listing}")


if __name__ == "__main__":
    sys.exit(main())

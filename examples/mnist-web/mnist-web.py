"""Export the CNN that examples/mnist trained for the browser, beside a page where a visitor
draws a digit and sees what the model reads, with its probabilities.

The exported function takes the drawn pixels (``[1, 1, 28, 28]``, 0 for black to 1 for white)
and returns the ten probabilities: MNIST's normalisation and the softmax run in the browser
too, so the page only draws and displays."""

from __future__ import annotations

import argparse
import functools
import http.server
import sys
from pathlib import Path

import burnish as bn
import burnish.functional as F
from burnish.data.batcher import MNIST_MEAN, MNIST_STD
from burnish.web import ExportError, export

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "mnist"))
from model import CnnConfig  # noqa: E402  (examples/mnist's model)


def export_page(record: Path, out: Path) -> None:
    """Export the CNN saved at ``record`` into ``out`` (the page's ``model/`` folder)."""
    device = bn.backend("wgpu").default_device()
    model = CnnConfig().init(device).load(record)

    def read_digit(pixels):
        return F.softmax(model((pixels - MNIST_MEAN) / MNIST_STD), dim=1)

    done = export(read_digit, [(1, 1, 28, 28)], out, device=device)
    print(f"exported {done.launches} launches of {len(done.kernels)} kernels to {done.path}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--run-dir", type=Path, default=Path("runs/mnist"),
                        help="examples/mnist's run folder, which holds model.safetensors")
    parser.add_argument("--out", type=Path, default=HERE / "page" / "model",
                        help="where the export goes (the page loads ./model/)")
    parser.add_argument("--serve", type=int, metavar="PORT", default=None,
                        help="then serve the page at http://127.0.0.1:PORT/ until Ctrl-C")
    args = parser.parse_args()
    record = args.run_dir / "model.safetensors"
    if not record.is_file():
        parser.error(f"no {record}: train the model first (python examples/mnist/mnist.py "
                     f"--run-dir {args.run_dir}), or pass --run-dir")
    try:
        export_page(record, args.out)
    except ExportError as error:
        sys.exit(f"mnist-web.py: {error}")
    if args.serve is not None:
        site = args.out.parent
        handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(site))
        with http.server.ThreadingHTTPServer(("127.0.0.1", args.serve), handler) as server:
            print(f"serving {site} at http://127.0.0.1:{args.serve}/ (Ctrl-C stops)")
            try:
                server.serve_forever()
            except KeyboardInterrupt:
                pass


if __name__ == "__main__":
    main()

"""``python -m burnish.remote serve --backend NAME [--host H] [--port P]``: run a server."""

from __future__ import annotations

import argparse
import sys

from burnish.remote.server import MAX_ELEMENTS, Server


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m burnish.remote",
                                     description="burnish's remote backend")
    commands = parser.add_subparsers(dest="command", required=True)
    serve = commands.add_parser("serve", help="serve a backend to remote clients")
    serve.add_argument("--backend", default="ndarray",
                       help="the backend to serve, decorators included (default: ndarray)")
    serve.add_argument("--host", default="127.0.0.1",
                       help="the interface to listen on (default: 127.0.0.1, this machine only; "
                            "0.0.0.0 for every interface)")
    serve.add_argument("--port", type=int, default=3000, help="default 3000; 0: any free port")
    serve.add_argument("--token", default=None,
                       help="the token clients must present (default: BURNISH_REMOTE_TOKEN, "
                            "else a random one, printed)")
    serve.add_argument("--certfile", help="a PEM certificate: serve TLS (wss://)")
    serve.add_argument("--keyfile", help="the certificate's private key (if not in certfile)")
    serve.add_argument("--max-elements", type=int, default=MAX_ELEMENTS,
                       help=f"the most elements one tensor may have (default {MAX_ELEMENTS})")
    serve.add_argument("--max-client-bytes", type=int, default=None,
                       help="the most bytes one client's tensors may take (default: no limit)")
    args = parser.parse_args(argv)
    server = Server(args.backend, args.host, args.port, token=args.token,
                    certfile=args.certfile, keyfile=args.keyfile,
                    max_elements=args.max_elements, max_client_bytes=args.max_client_bytes)
    print(f"burnish server: serving {server.backend.name} ({server.device}) on {server.url}",
          flush=True)
    if args.token is None and server.token != _environment_token():
        print(f"burnish server: token {server.token}", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    return 0


def _environment_token() -> str | None:
    import os

    return os.environ.get("BURNISH_REMOTE_TOKEN")


if __name__ == "__main__":
    sys.exit(main())

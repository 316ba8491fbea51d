"""``python -m burnish info``: installed distributions, backends, their devices and versions."""

from __future__ import annotations

import argparse
import platform
import sys

import numpy as np


def info() -> int:
    """Print what burnish finds installed; exit status 0."""
    import burnish
    from burnish import registry
    from burnish.errors import BurnishError
    from burnish.plugins import distributions

    print(f"burnish {burnish.__version__} (Python {platform.python_version()}, "
          f"NumPy {np.__version__})")
    print("\nDistributions:")
    for name, version in distributions():
        print(f"  {name:<32} {version}")
    print("\nBackends:")
    infos = registry.backend_infos()
    if not infos:
        print("  none: install one, e.g. pip install burnish-backend-ndarray")
    for name, meta in sorted(infos.items()):
        try:
            backend = registry.backend(name)
            devices = ", ".join(_device_line(backend, d) for d in backend.devices())
            dtypes = ", ".join(d.name for d in backend.dtypes(backend.default_device()))
            print(f"  {name:<10} {meta.package:<28} devices: {devices}")
            print(f"  {'':<10} {meta.description or '':<28} dtypes: {dtypes}")
        except BurnishError as error:
            print(f"  {name:<10} {meta.package:<28} unavailable: {error}")
        except Exception as error:  # a driver or a plugin that fails: say so, list the rest
            print(f"  {name:<10} {meta.package:<28} unavailable: {type(error).__name__}: {error}")
    decorators = registry.decorator_infos()
    if decorators:
        print("\nBackend decorators (use as NAME+backend, e.g. autodiff+ndarray):")
        for name, decorator in sorted(decorators.items()):
            print(f"  {name:<10} {decorator.package:<28} {decorator.description}")
    composites = registry.composite_infos()
    if composites:
        print("\nComposite backends (use as NAME(backend,backend,...), e.g. router(ndarray,wgpu)):")
        for name, composite in sorted(composites.items()):
            print(f"  {name:<10} {composite.package:<28} {composite.description}")
    from burnish.record import formats

    print("\nRecord formats:")
    for fmt in formats().values():
        print(f"  {fmt.name:<12} {fmt.extension}")
    return 0


def _device_line(backend, device) -> str:
    described = backend.describe_device(device)
    return f"{device} ({described})" if described else str(device)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m burnish", description=__doc__)
    commands = parser.add_subparsers(dest="command")
    commands.add_parser("info", help="list installed distributions, backends and devices")
    args = parser.parse_args(argv)
    if args.command == "info":
        return info()
    parser.print_help()
    return 2


if __name__ == "__main__":
    sys.exit(main())

"""The pytest plugin: the ``--backend`` option, the fixtures, and the skips for missing dtypes."""

from __future__ import annotations

import zlib
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest

import burnish
from burnish import DType
from burnish.backend import AutodiffOps
from burnish.conformance import compare, gradcheck
from burnish.conformance.capture_check import CaptureCheck
from burnish.errors import BurnishError

_HERE = Path(__file__).resolve().parent
_BACKEND = pytest.StashKey[Any]()
_DEVICE = pytest.StashKey[Any]()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("burnish", "burnish conformance suite")
    group.addoption("--backend", default="ndarray", metavar="NAME",
                    help="the burnish backend to test, decorators included "
                         "(e.g. ndarray, wgpu, autodiff+ndarray); default: ndarray")
    group.addoption("--device", default=None, metavar="DEVICE",
                    help="the device of that backend to test, as the backend writes it "
                         "(e.g. cuda:1); default: the backend's default device")
    # Not --capture: pytest's own option (output capturing) has that name.
    group.addoption("--replay", action="store_true",
                    help="run every op of the backend recorded and replayed (burnish.capture's "
                         "recorder), the suite checking the replayed results; for backends with "
                         "a capturer (wgpu, rocm, cuda, fusion+ of them)")
    group.addoption("--sample", type=int, default=1, metavar="N",
                    help="run about one case in N of each test (at least one of each; which ones "
                         "is fixed per test), deselecting the others: a quicker run that still "
                         "reaches every test; default: 1, every case")


def pytest_configure(config: pytest.Config) -> None:
    if config.getoption("--sample") < 1:
        raise pytest.UsageError(f"burnish conformance: --sample takes a count of 1 or more, "
                                f"not {config.getoption('--sample')}")
    config.addinivalue_line(
        "markers", "conformance: a test of the backend under test (--backend); every test of "
        "burnish.conformance has it, and other suites may mark their own tests with it")
    config.addinivalue_line(
        "markers", "requires_dtype(*dtypes): the test also needs these dtypes on the device "
        "under test (for indices, masks...); it is skipped where one is missing")
    config.addinivalue_line(
        "markers", "requires_autodiff: a gradient test, skipped unless the backend under test "
        "has autodiff (e.g. --backend autodiff+ndarray)")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # The plugin is loaded in every pytest session of the environment: it only acts on its own
    # tests (and on tests marked conformance), never on other suites' ``device`` fixtures.
    for item in items:
        if _HERE in Path(str(item.path)).resolve().parents:
            item.add_marker(pytest.mark.conformance)
    # Resolve the backend once, before any test runs, so that a backend that is not installed is
    # one clear usage error instead of an error in every test.
    if any(item.get_closest_marker("conformance") for item in items):
        _resolve(config)
    every = config.getoption("--sample")
    if every > 1:
        kept, dropped = _sample(items, every)
        if dropped:
            config.hook.pytest_deselected(items=dropped)
            items[:] = kept


def _sample(items: list[pytest.Item], every: int) -> tuple[list[pytest.Item], list[pytest.Item]]:
    """One case in ``every`` of each conformance test function, the others dropped. The cases
    kept start at an offset drawn from the test's name (the same on every run, different
    between tests), so that a parameter's first value is not always the one that runs; a test
    with fewer cases than that offset keeps its first one."""
    cases: dict[tuple[str, str], list[int]] = {}
    for index, item in enumerate(items):
        if item.get_closest_marker("conformance") is not None:
            function = getattr(item, "originalname", item.name)
            cases.setdefault((str(item.path), function), []).append(index)
    drop: set[int] = set()
    for (path, function), indices in cases.items():
        offset = zlib.crc32(f"{Path(path).name}::{function}".encode()) % every
        keep = set(indices[offset::every]) or {indices[0]}
        drop.update(i for i in indices if i not in keep)
    return ([item for i, item in enumerate(items) if i not in drop],
            [item for i, item in enumerate(items) if i in drop])


def _resolve(config: pytest.Config) -> tuple[Any, Any]:
    if _BACKEND not in config.stash:
        name = config.getoption("--backend")
        try:
            backend = burnish.backend(name)
            wanted = config.getoption("--device")
            device = backend.default_device() if wanted is None else _find_device(backend, wanted)
            if config.getoption("--replay"):
                backend = CaptureCheck(backend, device)
                device = backend.wrap_device(device)
        except BurnishError as error:
            raise pytest.UsageError(f"burnish conformance: {error}") from None
        except Exception as error:  # a backend whose package is broken or half-installed
            raise pytest.UsageError(f"burnish conformance: backend {name!r} could not be made: "
                                    f"{type(error).__name__}: {error}") from error
        config.stash[_BACKEND] = backend
        config.stash[_DEVICE] = device
    return config.stash[_BACKEND], config.stash[_DEVICE]


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    """With ``--replay``: how many op calls were replayed, and each op that ran eagerly."""
    backend = config.stash.get(_BACKEND, None)
    if isinstance(backend, CaptureCheck):
        terminalreporter.write_sep("=", "burnish conformance --replay")
        for line in backend.summary():
            terminalreporter.write_line(line)


def _find_device(backend: Any, wanted: str) -> Any:
    devices = backend.devices()
    for device in devices:
        if wanted in (str(device), str(device.index)):
            return device
    have = ", ".join(str(d) for d in devices)
    raise burnish.DeviceError(f"backend {backend.name!r} has no device {wanted!r}; it has {have}")


def pytest_runtest_setup(item: pytest.Item) -> None:
    """Skip a test whose dtype parameters (or ``requires_dtype`` marks) the device lacks."""
    if item.get_closest_marker("conformance") is None:
        return
    backend, device = _resolve(item.config)
    if item.get_closest_marker("requires_autodiff") and not isinstance(backend, AutodiffOps):
        pytest.skip(f"backend {backend.name!r} has no autodiff; run with --backend "
                    f"autodiff+{backend.name}")
    needed: list[DType] = []
    callspec = getattr(item, "callspec", None)
    if callspec is not None:
        for value in callspec.params.values():
            needed.extend(_dtypes_in(value))
    for mark in item.iter_markers("requires_dtype"):
        needed.extend(_dtypes_in(mark.args))
    supported = backend.dtypes(device)
    for dtype in needed:
        if dtype not in supported:
            pytest.skip(f"backend {backend.name!r} does not support dtype {dtype} on {device}")


def _dtypes_in(value: Any) -> Iterable[DType]:
    if isinstance(value, DType):
        yield value
    elif isinstance(value, tuple | list):
        for inner in value:
            yield from _dtypes_in(inner)


@pytest.fixture(scope="session")
def backend(request: pytest.FixtureRequest) -> Any:
    """The backend under test (``--backend``)."""
    return _resolve(request.config)[0]


@pytest.fixture(scope="session")
def device(request: pytest.FixtureRequest) -> Any:
    """The device under test (``--device``, else the backend's default): every tensor a
    conformance test makes lives there."""
    return _resolve(request.config)[1]


@pytest.fixture(scope="session")
def dtypes(backend: Any, device: Any) -> tuple[DType, ...]:
    """The dtypes the device under test supports."""
    return tuple(backend.dtypes(device))


@pytest.fixture(scope="session")
def grad_dtype(device: Any) -> DType:
    """The dtype of the gradient tests: float64 where the device under test has it, else
    float32 (see ``burnish.conformance.gradcheck``)."""
    return gradcheck.grad_dtype(device)


@pytest.fixture(scope="session")
def require_dtype(backend: Any, device: Any):
    """``require_dtype(dtype)`` skips the calling test when the device lacks ``dtype``."""

    def require(*wanted: DType) -> None:
        supported = backend.dtypes(device)
        for dtype in wanted:
            if dtype not in supported:
                pytest.skip(f"backend {backend.name!r} does not support dtype {dtype} on {device}")

    return require


@pytest.fixture(scope="session")
def assert_close():
    """``assert_close(tensor, reference, dtype=None, rtol=None, atol=None)``: see
    ``burnish.conformance.compare``."""
    return compare.assert_close


@pytest.fixture(scope="session")
def assert_equal():
    """``assert_equal(tensor, reference, dtype=None)``: exact comparison (NaN matches NaN)."""
    return compare.assert_equal

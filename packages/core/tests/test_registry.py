"""Finding backends by name, and the error for one that is not installed."""

import pytest

import burnish as bn
from burnish import registry


def test_ndarray_is_the_default():
    assert bn.default_backend().name == "ndarray"
    assert bn.default_device().backend is bn.backend("ndarray")


def test_backends_are_shared():
    assert bn.backend("ndarray") is bn.backend("ndarray")


def test_missing_backend_names_its_package(monkeypatch):
    # As if burnish-backend-wgpu were not installed, whether or not this environment has it.
    infos = {k: v for k, v in registry.backend_infos().items() if k != "wgpu"}
    monkeypatch.setattr(registry, "_infos", infos)
    monkeypatch.setattr(registry, "_instances", {})
    with pytest.raises(bn.BackendNotInstalledError, match="pip install burnish-backend-wgpu"):
        bn.backend("wgpu")


def test_unknown_backend_says_no_package_is_known():
    with pytest.raises(bn.BackendNotInstalledError, match="no known package provides it"):
        bn.backend("no-such-backend")


def test_missing_decorator_names_its_package(monkeypatch):
    # As if burnish-autodiff were not installed, whether or not this environment has it.
    monkeypatch.setattr(registry, "_decorators", {})
    monkeypatch.setattr(registry, "_instances", {})
    with pytest.raises(bn.BackendNotInstalledError, match="pip install burnish-autodiff"):
        bn.backend("autodiff+ndarray")


def test_info_command_lists_ndarray(capsys):
    from burnish.__main__ import main

    assert main(["info"]) == 0
    out = capsys.readouterr().out
    assert "ndarray" in out and "burnish-backend-ndarray" in out and "cpu:0" in out

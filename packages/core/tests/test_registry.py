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


def test_names_split_outside_parentheses():
    assert registry.split_name("autodiff+router(ndarray,fusion+wgpu)", "+") == [
        "autodiff", "router(ndarray,fusion+wgpu)"]
    assert registry.split_name("ndarray,router(a,b),c", ",") == ["ndarray", "router(a,b)", "c"]
    with pytest.raises(bn.BurnishError, match=r"'router\(a': 1 '\(' not closed"):
        registry.split_name("router(a", "+")
    with pytest.raises(bn.BurnishError, match="an empty part"):
        registry.split_name("autodiff++ndarray", "+")


def test_a_composite_backend_from_a_plugin(monkeypatch):
    """A composite registered by hand (as a third party's would be): its factory gets the
    members, made by name, decorators included, and decorators wrap the composite."""
    from burnish.plugins import CompositeInfo

    made = []

    def pair(members):
        made.append(members)
        return members[-1]

    monkeypatch.setattr(registry, "_composites", {"pair": CompositeInfo("pair", pair, "pkg")})
    monkeypatch.setattr(registry, "_instances", {})
    assert bn.backend("pair(ndarray, ndarray)") is bn.backend("ndarray")
    assert made == [[bn.backend("ndarray"), bn.backend("ndarray")]]
    with pytest.raises(bn.BurnishError, match="is written NAME"):
        bn.backend("pair(ndarray)x")


def test_missing_composite_names_its_package(monkeypatch):
    # As if burnish-router were not installed, whether or not this environment has it.
    monkeypatch.setattr(registry, "_composites", {})
    monkeypatch.setattr(registry, "_instances", {})
    with pytest.raises(bn.BackendNotInstalledError, match="pip install burnish-router"):
        bn.backend("router(ndarray,wgpu)")

"""burnish's conformance suite: `pytest --pyargs burnish.conformance --backend NAME`."""

from burnish.conformance.compare import assert_close, assert_equal

__all__ = ["assert_close", "assert_equal"]

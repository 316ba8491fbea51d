"""Kernels written once in the IR, grouped by what they compute."""

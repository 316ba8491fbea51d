"""burnish's default backend, NumPy on the CPU: ``burnish.backend("ndarray")``.

The class is ``burnish.ndarray.backend.NdArrayBackend``; this package imports nothing itself, so
that loading the plugin entry point stays cheap until the backend is first asked for.
"""

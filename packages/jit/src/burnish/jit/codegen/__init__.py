"""Code generators: one C-family renderer (OpenCL C, CUDA C) and one for WGSL."""

"""Support shared by xlikert's test suite and benchmarks (like :mod:`xarray.testing`).

:mod:`xlikert.testing.engines` starts the real inference engines (vLLM's CPU build,
llama.cpp's server) on loopback from the virtual environments that
``tests/engines/install.sh`` builds.
"""

"""The test suite's settings: the project's own, in development mode unless the environment says otherwise
(config/settings.py is production-safe by default). Tests of production behaviour start processes with
DEBUG=0 themselves (tests/test_deploy.py)."""

import os

os.environ.setdefault("DEBUG", "1")

if os.environ.get("PYTEST_XDIST_WORKER"):
    # Each parallel test worker computes on one thread: with as many workers as cores, BLAS, OpenMP (torch) and
    # numba threads on top only contend for the same cores. Set before numpy, torch or numba is imported (this
    # module is the first the worker loads), and inherited by the processes the tests start.
    for variable in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS"):
        os.environ.setdefault(variable, "1")

from config.settings import *  # noqa: E402, F403

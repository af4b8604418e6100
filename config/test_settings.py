"""The test suite's settings: the project's own, in development mode unless the environment says otherwise
(config/settings.py is production-safe by default). Tests of production behaviour start processes with
DEBUG=0 themselves (tests/test_deploy.py)."""

import os

os.environ.setdefault("DEBUG", "1")

from config.settings import *  # noqa: E402, F403

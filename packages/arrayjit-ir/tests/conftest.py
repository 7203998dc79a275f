"""Shared set-up of the arrayjit-ir tests."""

import os
import sys

from hypothesis import settings

# Tests import their helpers module (pytest runs with --import-mode=importlib).
sys.path.insert(0, os.path.dirname(__file__))

settings.register_profile("ci", derandomize=True, max_examples=25, deadline=None)
settings.register_profile("dev", max_examples=50, deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "dev"))

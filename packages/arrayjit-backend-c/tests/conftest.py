"""Shared set-up of the arrayjit-backend-c tests."""

import os
import sys

# Tests import their helpers module (pytest runs with --import-mode=importlib).
sys.path.insert(0, os.path.dirname(__file__))

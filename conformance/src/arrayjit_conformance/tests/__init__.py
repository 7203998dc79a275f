"""The conformance suite itself, shipped in the wheel so that it runs from an installed
distribution: ``pytest --pyargs arrayjit_conformance --arrayjit-backend NAME``."""

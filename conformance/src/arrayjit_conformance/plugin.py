"""pytest plugin of the arrayjit conformance suite (placeholder until the suite lands)."""

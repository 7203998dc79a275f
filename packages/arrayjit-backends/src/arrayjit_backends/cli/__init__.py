"""The ``arrayjit`` command: its subcommands, the demo, and the benchmark table and chart. The
top of the shared layer: it may import anything in it, and nothing in the layer imports it."""

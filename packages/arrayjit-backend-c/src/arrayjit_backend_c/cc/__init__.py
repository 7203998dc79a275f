"""The ``cc`` backend: the C dialect, finding and running the system C compiler, and the
compiler that links a routine's segments. Imports ``cpu`` and the shared layer, never ``llvm``."""

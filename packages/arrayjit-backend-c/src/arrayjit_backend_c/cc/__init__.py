"""The ``cc`` backend: the C dialect, finding and running the system C compiler, the compiler
that links a routine's segments, and the STREAM-style bandwidth baseline. Imports ``cpu`` and the
shared layer, never ``llvm``."""

"""The CPU runtime both backends share: a routine as native segments, the native crew of helper
threads, the process-wide LLVM JIT and the packed-matmul plan. Imports neither ``cc`` nor
``llvm``."""

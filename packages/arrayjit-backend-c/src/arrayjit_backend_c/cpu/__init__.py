"""The CPU runtime both backends share: a routine as native segments, the native crew of helper
threads, the packed-matmul plan and the bandwidth baseline. Imports neither ``cc`` nor ``llvm``."""

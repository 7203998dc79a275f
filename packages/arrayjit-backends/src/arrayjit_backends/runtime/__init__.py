"""What turns an implementation into a Backend: the CPU schedulers and devices, slab memory,
bindings, hazards, transfers, the value types (Device, Stream, Context, ...) and routines.
Imports ``impl``, ``codegen`` and ``settings``; never ``gpu``, ``cli``, the Backend or the registry."""

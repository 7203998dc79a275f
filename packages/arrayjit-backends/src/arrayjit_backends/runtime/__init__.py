"""What turns an implementation into a Backend, bottom to top: slab memory (``slab``), static
bindings and compile checks (``bindings``), the debug folder (``debug_output``), the trace
recorder (``trace``: ``ARRAYJIT_TRACE``), the CPU schedulers and devices (``schedulers``,
``cpu_devices``), what the values need of their backend (``owner``: a Protocol), the hazard
tables (``hazards``), zero-copy exchange with other array libraries (``dlpack``: the DLPack
structs and capsules; ``interop``: the exports and imports), the value types (``values``:
Device, Stream, Buffer, Context, Code), the copies (``transfers``), routines and linking
(``routine``), and the Backend's argument checks (``arg_checks``).

Imports ``impl``, ``codegen`` and ``settings``; never ``gpu``, ``cli``, the Backend or the
registry: the values know their backend only as an
:class:`~arrayjit_backends.runtime.owner.Owner`."""

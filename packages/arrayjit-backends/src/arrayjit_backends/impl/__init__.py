"""What a backend author writes against: the device contract, the CPU compiler base, the stream
API (queues, events, bells) and the compile cache. Imports only ``settings``, ``codegen`` and
the packages below ``arrayjit_backends``; never ``runtime``, ``gpu``, ``cli`` or the Backend."""

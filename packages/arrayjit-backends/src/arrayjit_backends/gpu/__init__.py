"""The GPU renderer and device recipe shared by OpenCL and CUDA, bottom to top: the dialect base
(``dialect``), the planner (``planner``), the kernel shapes (``matmul``, ``cell_reduction``,
``full_reduction``), row chains (``row_chain``), the program renderer (``program``) and
``GpuDevices`` (``devices``). Imports ``impl`` and ``codegen``; only the GPU device packages
import it."""

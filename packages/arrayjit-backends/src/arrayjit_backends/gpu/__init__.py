"""The GPU renderer and device recipe shared by OpenCL and CUDA: the dialect base, the kernel
shapes, the planner, row chains, the program renderer and ``GpuDevices``. Imports ``impl`` and
``codegen``; only the GPU device packages import it."""

"""Running a partitioned graph: its kernels launched and its eager calls made, in order.

- `kernel_cache`: generated kernels written to disk once and loaded once per process;
- `launch_config`: block sizes, grid and warps from a kernel's sizes (the settings benchmarks sweep);
- `step`: what kernel-launching steps share: the eager fallback, strict mode and the input checks;
- `kernel_step`, `horizontal_step`, `eager_step`: the three kinds of step;
- `graph`: the callable a compiled graph becomes, which runs its steps.
"""

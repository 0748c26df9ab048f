"""What lets a generated kernel run on CPU tensors: Triton's interpreter, with the fuser's stand-ins.

The same kernel source runs on a GPU and here. `shim` rebinds a kernel module's `libdevice` and `lib` to
NumPy versions: `libdevice` (CUDA's math library), `reduce` (NumPy reductions for the fuser's combine
functions) and `bf16` (bit-exact bfloat16 conversions). `triton_patches` mends what Triton's interpreter
itself does slowly or, in some versions, wrongly.

`fuser.lower.lowerings` hashes the source of `libdevice`, `reduce` and `bf16` into validation fingerprints: an
edit to them stales the manifests' `cpu` entries, as an edit to a lowering does.
"""

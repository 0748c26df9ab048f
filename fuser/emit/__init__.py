"""Emitting: the kernel IR, the builders that lower a kernel's nodes into it, and the printed Triton."""

"""Planning: which nodes share a kernel, what reads another row, horizontal batches, in-place folding."""

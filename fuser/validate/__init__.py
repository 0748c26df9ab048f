"""Validation: the per-architecture manifests the fuser obeys, and the probe kernels fingerprinted."""

"""The op-conformance suite: every op a fusion compiler lowers, checked against eager PyTorch.

Its content arrives with its own issue; it will treat `fuser` as one torch.compile backend among others.
"""

"""The op-conformance suite: every op a fusion compiler lowers, checked against eager PyTorch, with any
torch.compile backend. Grouped by job:

- `specs/`: the ops as data (one module per family), their samples, edge values, fused contexts, tiers;
- `harness/`: running a case and judging it — the runner, the oracle and its policy, the backend probe,
  the ledger of expected failures, the reports;
- `fuzz/`: property-based programs of many ops; `zoo/`: real transformers/timm models;
- `validate/`: validating an op into the fuser's per-architecture manifest, and checking manifests;
- `plugin.py` (the pytest plugin, opt-in: `-p conformance.plugin`), and the test files pytest collects.
"""

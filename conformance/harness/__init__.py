"""Running a case and judging it: the runner, the oracle and its policy, the backend probe, the ledger and the reports."""

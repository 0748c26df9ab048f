"""Testing only: planted miscompiles the quality tests show the suites catch."""

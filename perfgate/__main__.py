"""`python -m perfgate`: see `perfgate.cli`."""

import sys

from perfgate.cli import main

sys.exit(main())

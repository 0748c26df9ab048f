"""`python -m conformance.validate <op> [<op> ...]`: see conformance/validate/__init__.py."""

import sys

from conformance.validate import main

sys.exit(main())

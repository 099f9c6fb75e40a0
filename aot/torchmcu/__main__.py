"""`python -m torchmcu ...`: the command line (torchmcu.cli)."""

import sys

from .cli import main

sys.exit(main())

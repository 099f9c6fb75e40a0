"""`python -m torchmcu ...`: the command line (torchmcu.cli)."""

import sys

try:
    from .cli import main
except KeyboardInterrupt:  # Ctrl-C while the command line itself imports: as within a command
    print("\ntorchmcu: interrupted", file=sys.stderr)
    sys.exit(130)

sys.exit(main())

"""`python -m overlapsat.cli`: the command line."""

import sys

from overlapsat.cli import main

sys.exit(main())

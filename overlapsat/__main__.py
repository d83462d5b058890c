"""`python -m overlapsat`: the command line."""

import sys

from overlapsat._entry import main

sys.exit(main())

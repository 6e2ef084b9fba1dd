"""`python -m porchkit` runs the same command line as the `porchkit` script."""

import sys

from porchkit.cli import main

sys.exit(main())

"""`python -m vcctl`."""

import sys

from vcctl.cli import main

sys.exit(main())

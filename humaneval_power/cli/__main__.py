"""``python -m humaneval_power.cli``."""
import sys

from . import main

sys.exit(main())

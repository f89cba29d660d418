"""python -m tests.sim: run seeds (see tests/sim/run.py)."""

import sys

from tests.sim.run import main

sys.exit(main())

"""``python -m tests.linearizability`` (``make jepsen``): see tests/linearizability/longrun.py."""

import sys

from tests.linearizability.longrun import main

sys.exit(main())

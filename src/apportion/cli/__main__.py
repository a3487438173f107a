"""``python -m apportion.cli``: the same as the ``apportion`` command."""

import sys

from apportion.cli import main

sys.exit(main())

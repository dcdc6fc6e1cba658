"""``python -m cosim.cli``: the same as the ``hwcosim`` command."""

import sys

from hwcosim.cosim.cli import main

sys.exit(main())

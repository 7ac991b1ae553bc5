"""``python -m crawlstack.cli``: the ``crawlstack`` command."""

import sys

from crawlstack.cli import main

sys.exit(main())

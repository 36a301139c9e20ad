"""``python -m puaudit_jax.cli``: the ``puaudit`` command."""

import sys

from .main import main

sys.exit(main())

"""``python -m jfa_verify.cli``: the ``jfa-verify`` command (tests and subprocess workers start it this way)."""

import sys

from jfa_verify.cli import main

sys.exit(main())

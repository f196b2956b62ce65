"""`python -m devcheck.torch check FILE.py:NAME --input x:float32[8,128]`; see `cli.py`."""

import sys

from .cli import main

sys.exit(main())

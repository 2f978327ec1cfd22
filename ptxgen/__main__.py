"""`python -m ptxgen ...` is the `ptxgen` command."""
import sys

from .cli import main

sys.exit(main())

"""`python -m models.serving.proxy`: run the rollout proxy (see cli.py)."""

import sys

from models.serving.proxy.cli import main

if __name__ == "__main__":
    sys.exit(main())

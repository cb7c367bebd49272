"""``python -m sru.deploy op-library``: build the fused kernel's custom-op library if needed, print its path."""
import sys

from sru.deploy import main

sys.exit(main())

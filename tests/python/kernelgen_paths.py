"""Where the Python tests find the repository and the kernelgen binary they test (`make test`
names it in KERNELGEN_BIN; by default the debug build)."""

import os
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BIN = os.environ.get("KERNELGEN_BIN", str(ROOT / "target" / "debug" / "kernelgen"))

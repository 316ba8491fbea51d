"""Makes train_toy.py importable: tests import it and also run it as a script (Ctrl-C, dashboard).

Under pytest's importlib mode, which the tests session uses, a test folder is not on sys.path.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

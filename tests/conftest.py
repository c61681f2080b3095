import os
import sys

# Tests run from the repo root; make the project importable even without the editable install.
sys.path.insert(0, os.path.abspath(os.path.join(os.path.dirname(__file__), '..')))
os.environ.setdefault('JAX_PLATFORMS', 'cpu')

"""tests/ has no __init__.py, so pytest (import mode "prepend") puts this directory on sys.path
when it loads this conftest: the helpers (ptxsim, the stand-in driver) import as `support.x`,
from tests/gpu/ too.  examples/ comes from `pythonpath` in pyproject.toml."""

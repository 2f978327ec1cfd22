"""tests/ has no __init__.py, so pytest (import mode "prepend") puts this directory on sys.path
when it loads this conftest: the helpers import as `support.x` and the fakes as `_fakecuda`,
from tests/gpu/ too.  examples/ comes from `pythonpath` in pyproject.toml."""

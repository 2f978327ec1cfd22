"""What @dataclass itself costs during `import ptxgen` after `import torch`, per module
(the real decorator, timed)."""
import time
import torch
import dataclasses
real = dataclasses.dataclass
spent = {}
def timed(cls=None, **kw):
    def wrap(c):
        t = time.perf_counter(); r = real(c, **kw); spent[c.__module__] = spent.get(c.__module__, 0) + time.perf_counter() - t
        return r
    return wrap if cls is None else wrap(cls)
dataclasses.dataclass = timed
t = time.perf_counter()
import ptxgen
tot = time.perf_counter() - t
print(f"import {tot*1e3:.1f} ms; dataclass processing {sum(spent.values())*1e3:.2f} ms: " + ", ".join(f"{k} {v*1e3:.2f}" for k, v in spent.items()))

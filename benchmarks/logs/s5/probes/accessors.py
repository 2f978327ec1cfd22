"""Per-call cost of the torch accessors a checked launch makes (cuda tensors)."""
import time, torch
a = torch.empty(1 << 20, device="cuda"); b = torch.empty(1 << 20, device="cuda")
T = torch.Tensor; D = torch.float32
raw = torch._C._cuda_getCurrentRawStream
N = 200000
def t(name, f):
    best = 1e9
    for _ in range(5):
        t0 = time.perf_counter(); f(N); best = min(best, time.perf_counter() - t0)
    print(f"{name:40s} {best / N * 1e9:7.1f} ns")
def mk(expr):
    src = f"def f(n):\n    for _ in range(n):\n        {expr}\n"
    env = dict(a=a, b=b, T=T, D=D, raw=raw); exec(src, env); return env["f"]
for e in ["pass", "a.__class__ is T", "a.dtype is D", "(s,) = a.shape", "a.get_device()",
          "a.data_ptr()", "a.is_contiguous()", "raw(0)", "a.stride()", "a.device", "a.is_cuda",
          "a.size()", "a.dim()", "a.numel()", "a.storage_offset()", "a.size(0)", "a.nbytes",
          "a.__cuda_array_interface__", "a._version", "a.untyped_storage().data_ptr()"]:
    t(e, mk(e))

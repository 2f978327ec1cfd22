"""The 2-GPU test's helpers on one GPU (both "devices" cuda:0): the two-thread run with a
per-launch grid and with constant dims (the generated launch from two threads at once), and
the generated-launch check of the constant-dims kernel.  Checks the tests' own logic and
references on real hardware; it cannot check a second device."""
import sys
import numpy as np
import torch

sys.path.insert(0, "tests/gpu")
import test_runtime_multi_gpu as t   # noqa: E402

ok = True
for dims in ("per-launch-grid", "constant"):
    for set_device in (False, True):
        n = 1 << 16
        k = t.make_accumulate(n if dims == "constant" else None)
        got, wants = t.run_two_threads(k, (0, 0), n, set_device=set_device)
        same = [bool(np.array_equal(g, w)) for g, w in zip(got, wants)]
        fast = {d: v is not None for d, v in k._fast_targets.items()}
        print(f"two threads on cuda:0, {dims}, set_device={set_device}: bit-exact {same}, "
              f"fast targets {fast}")
        ok &= all(same) and (dims != "constant" or fast == {0: True})

n = 16384
k = t.make_affine_fixed(n)
out, x, want = t.inputs(0, n)
k(out, x, 1.5, -0.25)
first = np.array_equal(t.bits(out), want.view(np.uint32))
taken = t.counting_fast_launch(k)
res = []
for seed in (7, 8):
    out, x, want = t.inputs(0, n, seed=seed)
    k(out, x, 1.5, -0.25)
    res.append(bool(np.array_equal(t.bits(out), want.view(np.uint32))))
print(f"constant dims on cuda:0: first launch bit-exact {first}, generated launches {taken}, "
      f"bit-exact {res}")
ok &= first and taken == [True, True] and all(res)
print("MULTI_GPU_ON_ONE", "OK" if ok else "FAIL")

# call 2: the cupy helper of the 2-GPU test, on cuda:0
try:
    import cupy as cp
except ImportError:
    cp = None
if cp is not None:
    k = t.make_affine()
    got, want = t.cupy_affine(cp, k, 0)
    same = bool(np.array_equal(got, want))
    print(f"cupy_affine on cuda:0: bit-exact {same}, launchers {sorted(k._launchers)}")
    print("CUPY_ON_ONE", "OK" if same and sorted(k._launchers) == [0] else "FAIL")

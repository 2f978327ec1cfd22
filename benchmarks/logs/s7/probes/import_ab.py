"""`import ptxgen` after `import torch` from the checkout given as argv[1] (ms); run
alternately on the old and the new tree (a git worktree) for import_ab_old_new_ms.txt."""
import sys, time
sys.path.insert(0, sys.argv[1])
import torch
t = time.perf_counter()
import ptxgen
print((time.perf_counter() - t) * 1e3)

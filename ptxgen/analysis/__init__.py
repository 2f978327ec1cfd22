"""Analyses over the IR: the simplifier (affine forms), facts (bounds, divisibility),
warp/CTA uniformity and byte offsets.  Read-only over ir; used by primitives, passes,
emit and the builder alike."""

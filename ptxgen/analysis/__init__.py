"""Analyses over the IR: the simplifier (affine forms), facts (bounds, divisibility),
warp/CTA uniformity, byte offsets and exact index ranges (ranges.py: is an access provably
out of bounds?).  Read-only over ir; used by primitives, passes, emit and the builder alike."""

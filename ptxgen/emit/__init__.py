"""Emission: a prepared PrimFunc (passes.prepare: no tile op, no unrolled loop) -> the PTX
module text, with every IR statement marked by a comment.  `codegen.Codegen` walks the
statements; `values` (registers, expressions), `address`/`memory` (loads, stores, storage)
and `convert` (immediates, conversions) are its mixins; every instruction text comes from
target.forms."""

"""Targets: every arch/PTX-version gate, per-arch limit and instruction form.

`table` holds the hardware facts as data (minimum .version per target, instruction
gates, shared-memory limits, cache hints, the 256-bit vector rule); `forms` gives the
instruction forms of templates/ (pre-rendered in `forms_table`).  Everything above this layer
asks here; nothing here imports anything of ptxgen but `errors`.
"""
from .table import (CACHE_HINTS, GATES, MAX_PTX, MIN_PTX, MODIFIER_PTX, SMEM_LIMITS,  # noqa: F401
                    TCGEN05_ARCHS, TMEM_COLS, WIDE_VECTOR_BITS, WIDE_VECTOR_GATE, Gate, Target,
                    arch_specific, cache_modifiers, check_opcode, gate_for, has_opcode,
                    parse_target, smem_limits, wide_vector_refusal)

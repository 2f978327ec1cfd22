"""Targets: every arch/PTX-version gate, per-arch limit and instruction form.

`table` holds the hardware facts as data (minimum .version per target, instruction
gates, shared-memory limits, cache hints, the vector widths, TMA's 16-byte unit, the
atomics' types and modifiers); `forms` gives the instruction forms of templates/
(pre-rendered in `forms_table`).  Everything above this layer asks here; nothing here
imports anything of ptxgen but `errors`.
"""
from .table import (ATOM_SEMS, ATOMIC_CLUSTER_SPACE, ATOMIC_SCOPES,  # noqa: F401
                    ATOMIC_SPACES, ATOMIC_TYPES, BULK_MAX_BYTES, CACHE_HINTS, FENCE_SEMS,
                    GATES, MAX_PTX, MIN_PTX, MODIFIER_PTX, RED_OPS, RED_SEMS, SMEM_LIMITS,
                    STATE_SPACE, TCGEN05_ARCHS, TMA_ALIGN, TMA_MAX_BOX, TMEM_COLS,
                    VECTOR_BITS, WIDE_VECTOR_BITS, WIDE_VECTOR_GATE, Gate, Target, arch_specific,
                    cache_modifiers, check_opcode, gate_for, has_opcode, parse_target,
                    smem_limits, wide_vector_refusal)

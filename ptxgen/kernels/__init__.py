"""Kernels shipped with ptxgen."""

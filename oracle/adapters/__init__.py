"""Kernel modules built from the references: ``dense``, ``mock`` and ``sdpa``.

Each follows the contract (``attention`` and, where it can, ``attention_with_lse``) and must pass
the whole suite; that is how we know the suite does not fail correct kernels.
"""

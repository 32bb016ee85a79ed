"""Kernel modules built from the references, and from what users compare against.

``dense`` and ``mock`` (the float64 oracle and the blockwise mock) must pass the whole suite; that
is how we know the suite does not fail correct kernels. ``sdpa`` (PyTorch's SDPA, whatever backend
it picks), ``sdpa_flash``, ``sdpa_efficient``, ``sdpa_cudnn``, ``sdpa_math`` (one backend each) and
``flex`` (FlexAttention, compiled) are the kernels a user of this suite compares theirs against:
each declares the features and limits it honestly has, and where one fails a check, that is a
finding about it, written up in its docstring, not something its adapter hides.
"""

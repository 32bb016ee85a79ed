"""Kernel module with one bug: importing it turns on TF32 for float32 matmuls and cuDNN
(``torch.backends.cuda.matmul.allow_tf32 = True`` at the top of the module, as many training
scripts and some kernel packages do for their own speed).

Every call is right, and no call changes anything: the switch was set once, at import. What it
breaks is every float32 matmul and convolution the importing program runs on a GPU afterwards (10
mantissa bits of each operand, not 23). Smallest input that shows it: the switch before and after
``import``. Only a fresh process sees it (``properties.process_state.check_fresh_process``).
"""

import torch

from tests.broken._float32 import attention, attention_with_lse

__all__ = ["attention", "attention_with_lse"]

torch.backends.cuda.matmul.allow_tf32 = True  # the bug: a process-wide switch, set by an import
torch.backends.cudnn.allow_tf32 = True

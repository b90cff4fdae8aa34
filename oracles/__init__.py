"""References for JFA: the only reference implementations in the repository.

Each takes the :class:`~jfa_verify.core.contract.JaggedProblem` the caller validated
once, and the tensors: ``oracle(problem, q, k, v, do=None)``.

* :func:`reference_attention`: exact, float64, per sequence.
* :func:`padded_sdpa_attention`: torch SDPA on padded tensors in the test dtype.
* :func:`blockwise_attention`: the online-softmax algorithm itself, in plain torch.
"""

from .blockwise import blockwise_attention
from .float64 import reference_attention
from .padded_sdpa import padded_sdpa_attention

__all__ = ["reference_attention", "padded_sdpa_attention", "blockwise_attention"]

"""From one example batch to the most general verified export: ``dims="auto"``.

The GPT of ``examples/fix_gpt.py`` (flax nnx, a learned table of 512 positions sliced to the
sequence) and one batch of token ids, shape (2, 7): smtdims makes every dimension a variable,
exports, fixes what JAX refuses (the sequence bounded by the table) and verifies the family end to
end, the example among the samples. No specification to guess.

    pip install flax        # (the test extra has it)
    python examples/auto_gpt.py
"""

import numpy as np
from fix_gpt import gpt
from smtdims_jax.pipeline import export_and_verify

if __name__ == "__main__":
    batch = np.zeros((2, 7), np.int32)  # one example: 2 sequences of 7 tokens
    auto = export_and_verify(gpt, batch, dims="auto", samples=4)
    print(auto)
    print(f"  {auto.command('examples/fix_gpt.py:gpt')}")

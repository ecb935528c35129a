"""Properties on random cases: answers against brute force, ISL and the fuzzer's oracle (``oracle.py``), and
the fuzzer's saved reproducers (``regressions/``)."""

"""The engines: Z3 (encoding, solver sessions, the worker pool) and ISL (in process under a
quota, else a worker), and the killable worker processes both run in."""

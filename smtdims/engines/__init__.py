"""The engines: Z3 (encoding, a constraint set's Z3 side, the worker pool) and ISL (in process under a
quota, else a worker), and the killable worker processes both run in."""

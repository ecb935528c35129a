"""The export pipeline: export_and_verify, the fix loop, ``dims="auto"``, real and library models,
``smtdims export`` and ``smtdims run``."""

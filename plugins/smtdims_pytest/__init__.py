"""pytest plugin: ``pytest --smtdims`` and ``@pytest.mark.smtdims`` (see :mod:`.plugin`)."""

"""Helper modules for the export-pipeline tests (also used by scripts/accelerator_check.py)."""

"""Helper modules for the export-pipeline tests (also used by scripts/gpu_check.sh)."""

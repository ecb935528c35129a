# Sourced by the test scripts: install_once VENV PIP_ARGS... installs the editable package with
# PIP_ARGS into VENV, and skips pip when neither pyproject.toml nor the arguments changed since the
# last successful install there (pip's "already satisfied" pass costs ~20 s on every run otherwise).
# SMTDIMS_REINSTALL=1 forces the install. INSTALL_STAMP=NAME keeps a stamp of its own, so that two
# installs into one venv (the tests' and the docs') do not undo each other's stamp. INSTALL_CHECK is the
# Python that must run for the stamp to count (default: importing smtdims and the JAX plugin).
install_once() {
  local venv=$1
  shift
  local stamp_file="$venv/.smtdims-install-stamp${INSTALL_STAMP:+-$INSTALL_STAMP}"
  local stamp
  stamp=$( { cat pyproject.toml; echo "$*"; "$venv/bin/python" -V 2>&1; } | sha256sum | cut -d' ' -f1)
  if [ "${SMTDIMS_REINSTALL:-0}" != 1 ] && [ -f "$stamp_file" ] && [ "$(cat "$stamp_file")" = "$stamp" ] \
      && "$venv/bin/python" -c "${INSTALL_CHECK:-import smtdims, smtdims_jax}" >/dev/null 2>&1; then
    echo "install: $venv is up to date (pyproject.toml unchanged; SMTDIMS_REINSTALL=1 reinstalls)"
    return 0
  fi
  rm -f "$stamp_file"
  "$venv/bin/python" -m pip install -q --upgrade pip
  "$venv/bin/python" -m pip install -q "$@"
  echo "$stamp" > "$stamp_file"
}

# parallel ARGS...: pytest-xdist's options for the suite (every core, one test file per worker at a
# time so that module fixtures are built once), unless ARGS choose the workers themselves (-n, -p
# no:xdist) or SMTDIMS_TEST_WORKERS=0 asks for one process. A worker that crashes ends the run
# (--max-worker-restart=0): with --dist loadfile, a replaced worker once left the run waiting for good.
parallel() {
  local a
  for a in "$@"; do
    case "$a" in -n|-n*|--numprocesses*|no:xdist) return 0 ;; esac
  done
  [ "${SMTDIMS_TEST_WORKERS:-auto}" = 0 ] && return 0
  echo "-n ${SMTDIMS_TEST_WORKERS:-auto} --dist loadfile --max-worker-restart=0"
}

# The suite starts a few hundred Python processes (the CLI, the transcripts, the probes), each importing
# smtdims from this checkout: where PYTHONDONTWRITEBYTECODE is set (as on this project's machines)
# each compiled its 15,000 lines again, about 0.6 s a process. The test scripts let Python keep the
# bytecode (__pycache__/ is git-ignored); pip compiles the installed packages either way.
unset PYTHONDONTWRITEBYTECODE

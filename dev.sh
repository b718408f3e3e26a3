#!/usr/bin/env bash
# The two commands of the README:
#   ./dev.sh demo [FOLDER]   set up .venv if needed, then run the demo (default folder ./demo-lake)
#   ./dev.sh test [ARGS...]  set up .venv if needed, then run the whole test suite (two pytest
#                            processes side by side), or pytest ARGS in one
# Set-up creates a virtual environment in .venv and installs the package with its test
# dependencies into it (redone whenever pyproject.toml changes), then builds the JVM
# connector's jar (indexeddf/spark/jars/, rebuilt when connector/ changes; needs javac).
set -euo pipefail
cd "$(dirname "$0")"

VENV="${INDEXEDDF_VENV:-.venv}"
PY="$VENV/bin/python"

setup() {
    command -v java >/dev/null 2>&1 || {
        echo "error: Java (17 or newer) is needed by Spark and is not on PATH; install a JDK first" >&2
        exit 1
    }
    if [ ! -x "$PY" ]; then
        echo "==> creating the virtual environment in $VENV"
        python3 -m venv "$VENV"
    fi
    local stamp="$VENV/.indexeddf-installed"
    if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
        echo "==> installing indexeddf and its dependencies into $VENV"
        local log="$VENV/install.log"
        if ! { "$PY" -m pip install --upgrade pip && "$PY" -m pip install -e '.[test]'; } >"$log" 2>&1; then
            cat "$log" >&2
            echo "error: installation failed (log above, also in $log)" >&2
            exit 1
        fi
        touch "$stamp"
    fi
    # The package's bytecode, compiled once: an editable install leaves it to each process's
    # first import, and where PYTHONDONTWRITEBYTECODE is set (CI machines) every process compiles
    # it again, Spark's Python processes too (0.2-0.3 CPU-s each). Stale files are recompiled.
    "$PY" -m compileall -q indexeddf >/dev/null
    # The JVM connector (format "indexeddf" in Spark): compiled with the JDK's javac against
    # pyspark's jars, rebuilt only when its sources change. Without javac this warns and the
    # Python data source stays the fallback.
    "$PY" -m indexeddf.spark.connector
    # Spark starts its Python workers with this interpreter, so they see the package
    # (INDEXEDDF_VENV may be relative to the clone or absolute).
    local abs_py="$PY"
    case "$PY" in /*) ;; *) abs_py="$PWD/$PY" ;; esac
    export PYSPARK_PYTHON="$abs_py"
    export PYSPARK_DRIVER_PYTHON="$abs_py"
}

case "${1:-}" in
    demo)
        setup
        exec "$PY" -m indexeddf.demo "${2:-./demo-lake}"
        ;;
    test)
        setup
        shift
        if [ $# -gt 0 ]; then
            exec "$PY" -m pytest "$@"
        fi
        # The whole suite, in two pytest processes side by side (tests/conftest.py, SHARD): the
        # tests that use the run's one Spark session here, the others beside them in the
        # background (their output is shown when both are done). Spark's tests leave one of the
        # two cores idle much of the time.
        other_log="$VENV/test-other.log"
        INDEXEDDF_TEST_SHARD=other "$PY" -m pytest -o cache_dir=.pytest_cache/other >"$other_log" 2>&1 &
        other=$!
        trap 'kill "$other" 2>/dev/null || true' EXIT
        status=0
        INDEXEDDF_TEST_SHARD=spark "$PY" -m pytest || status=$?
        other_status=0
        wait "$other" || other_status=$?
        trap - EXIT
        echo
        echo "==> the tests that do not use the run's Spark session, run beside the ones above ($other_log):"
        cat "$other_log"
        if [ "$status" -eq 0 ]; then status=$other_status; fi
        exit "$status"
        ;;
    *)
        echo "usage: ./dev.sh demo [FOLDER] | ./dev.sh test [PYTEST ARGS...]" >&2
        exit 2
        ;;
esac

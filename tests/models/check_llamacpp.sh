#!/usr/bin/env bash
# check_llamacpp.sh - the external check (make test-llamacpp; not part of make test, hence not
# named test_*.sh): the kit's single-device llama forward against llama.cpp's, on SmolLM2,
# through the llama-cpp-python package (pip install llama-cpp-python builds llama.cpp from
# source: several minutes). When llama_cpp does not import or the model is absent it compares
# nothing and says so in one line naming the fix ("skipped, nothing compared"), exit 0.
# tests/models/check_llamacpp.py says what is compared and why each bound is what it is.
# Env: PYTHON (default python3), GGUF (default datasets/cache/SmolLM2-...), B, MPICC, MPIRUN.
set -u
cd "$(dirname "$0")/../.." || exit 1
: "${PYTHON:=python3}" "${B:=build}" "${MPICC:=mpicc}" "${MPIRUN:=mpirun}"
export OMPI_MCA_rmaps_base_oversubscribe=1 OPENBLAS_NUM_THREADS=1
if [ "$(id -u)" = 0 ]; then export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1; fi

if ! "$PYTHON" -c "import llama_cpp, numpy" >/dev/null 2>&1; then
    echo "# skipped, nothing compared: $PYTHON cannot import llama_cpp and numpy (pip install llama-cpp-python numpy, or PYTHON=/path/to/venv/bin/python)"
    exit 0
fi
model=${GGUF:-datasets/cache/SmolLM2-135M-Instruct.Q4_1.gguf}
if [ ! -f "$model" ]; then
    echo "# skipped, nothing compared: no model at $model (scripts/fetch-model.sh, or GGUF=file)"
    exit 0
fi
helper=$B/cpu/tests/llamacpp_dump
mkdir -p "$(dirname "$helper")"
# shellcheck disable=SC2086
if ! $MPICC -std=c11 -O2 -Wall -Wextra -D_GNU_SOURCE -Icommon -Ikernels -Idatasets -Imodels tests/models/llamacpp_dump.c \
    "$B/cpu/libparalab.a" -lopenblas -lcjson -lz -lm -o "$helper"; then
    echo "not ok - the helper builds (make libs first?)"
    exit 1
fi
work=$(mktemp -d "${TMPDIR:-/tmp}/paralab-llamacpp.XXXXXX")
trap 'rm -rf "$work"' EXIT
echo "# llama-cpp-python $("$PYTHON" -c 'import llama_cpp; print(llama_cpp.__version__)'), model $model"
# llama.cpp logs to stderr from C: kept in a file, shown when something fails
"$PYTHON" tests/models/check_llamacpp.py "$model" "$helper" "$MPIRUN" "$work" 2>"$work/stderr.log"
rc=$?
[ $rc -eq 0 ] || { echo "# stderr (last lines):"; grep -v '^\[\|^llama_model_\|^load\|^print_info' "$work/stderr.log" | tail -n 8 | sed 's/^/#   /'; }
exit $rc

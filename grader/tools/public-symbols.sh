#!/usr/bin/env bash
# public-symbols.sh CC - the functions a lab's code may call: every pl_, kern_, ds_, gpt_
# and llm_ function declared in a public header (common/, kernels/, datasets/, models/; not
# their internal/ folders), but those that open, read or write files, one per line.
# student-object.sh refuses any other.
set -u
cc=${1:-cc}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
{
    echo '#include "pl.h"'
    for h in kernels/*.h datasets/*.h models/*.h; do [ -f "$h" ] && echo "#include \"$(basename "$h")\""; done
} >"$tmp/all.c"
for defs in "" "-DPL_HAVE_CUDA -DPL_HAVE_NCCL"; do
    # shellcheck disable=SC2086
    $cc -E -P $defs -Icommon -Ikernels -Idatasets -Imodels "$tmp/all.c" || exit 1
done | grep -oE '\b(pl|plc|drv|kern|ds|gpt|llm)_[A-Za-z0-9_]*[[:space:]]*\(' | sed 's/[[:space:]]*($//' |
    # what reads or writes files is the kit's job, never a lab's (a student's code could read
    # any file with it, a hidden rubric included): the loaders, the writers, the model files
    grep -vE '^ds_.*(open|load|read_file|write|save)|^llm_load|^ds_fashion_dir$' | sort -u

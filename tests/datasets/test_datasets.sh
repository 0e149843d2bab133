#!/usr/bin/env bash
# test_datasets.sh - the datasets/ unit tests (IDX reader, Fashion-MNIST loader on real and
# hand-made broken files, sampler, synthetic data) and a short libFuzzer run of the IDX
# parser (FUZZ_SECONDS, default 5): clang with libFuzzer is needed (install-deps.sh --tests).
set -u
cd "$(dirname "$0")/../.."
: "${MAKE:=make}" "${FUZZ_SECONDS:=5}"
TMP=$(mktemp -d /tmp/paralab-datasets.XXXXXX)
trap 'rm -rf "$TMP"' EXIT
if ! $MAKE --no-print-directory -s build/cpu/tests/test_datasets >"$TMP/build.log" 2>&1; then
    echo "not ok - test_datasets builds: $(tail -n 3 "$TMP/build.log" | tr '\n' ' ')"
    exit 1
fi
timeout 120 build/cpu/tests/test_datasets "$TMP"
rc=$?
[ $rc = 0 ] || echo "not ok - test_datasets exited with $rc"

if ! command -v clang >/dev/null 2>&1; then
    echo "not ok - fuzzing the IDX parser needs clang with libFuzzer (apt-get install clang, or scripts/install-deps.sh --tests)"
    exit 0
fi
if ! $MAKE --no-print-directory -s build/tools/fuzz_idx >"$TMP/fbuild.log" 2>&1; then
    echo "not ok - the IDX fuzz target builds with clang -fsanitize=fuzzer,address: $(tail -n 2 "$TMP/fbuild.log" | tr '\n' ' ')"
    exit 1
fi
# seed corpus: a valid labels file, a valid 2x2x2 images file, a truncated one
mkdir -p "$TMP/corpus"
printf '\x00\x00\x08\x01\x00\x00\x00\x03\x01\x02\x03' >"$TMP/corpus/labels"
printf '\x00\x00\x08\x03\x00\x00\x00\x02\x00\x00\x00\x02\x00\x00\x00\x02abcdefgh' >"$TMP/corpus/images"
printf '\x00\x00\x08\x03\x00\x00\x00\x02\x00\x00' >"$TMP/corpus/short"
(cd "$TMP" && timeout $((FUZZ_SECONDS + 60)) "$OLDPWD/build/tools/fuzz_idx" -max_total_time="$FUZZ_SECONDS" \
    -max_len=256 corpus >"$TMP/fuzz.log" 2>&1)
rc=$?
runs=$(grep -oE '#[0-9]+' "$TMP/fuzz.log" | tail -n 1)
if [ $rc = 0 ]; then
    echo "ok - fuzzing the IDX parser for ${FUZZ_SECONDS} s: no crash, leak or sanitizer report (${runs:-?} inputs)"
else
    echo "not ok - fuzzing the IDX parser (exit $rc): $(grep -m1 -E 'ERROR|SUMMARY' "$TMP/fuzz.log")"
fi

#!/usr/bin/env bash
# test_gguf.sh - the GGUF reader/writer/dequantiser, the llama config and the BPE tokenizer
# (tests/datasets/test_gguf.c; its SmolLM2 checks run when scripts/fetch-model.sh has fetched
# the model or GGUF= names it), then a short libFuzzer run of the reader and the tokenizer
# (FUZZ_SECONDS, default 10) when clang with libFuzzer is installed. B= picks the build
# directory (default build); the binaries come from make.
set -u
cd "$(dirname "$0")/../.."
: "${MAKE:=make}" "${B:=build}" "${FUZZ_SECONDS:=10}"
TEST=$B/cpu/tests/test_gguf
FUZZ=$B/tools/fuzz_gguf
TMP=$(mktemp -d /tmp/paralab-gguf.XXXXXX)
trap 'rm -rf "$TMP"' EXIT

if ! $MAKE --no-print-directory -s B="$B" "$TEST" >"$TMP/build.log" 2>&1 || [ ! -x "$TEST" ]; then
    echo "not ok - test_gguf builds: $(tail -n 3 "$TMP/build.log" | tr '\n' ' ')"
    exit 1
fi
timeout 120 "$TEST" "$TMP"
rc=$?
[ $rc = 0 ] || echo "not ok - test_gguf exited with $rc"

# libFuzzer: clang's -fsanitize=fuzzer must link (clang alone, without compiler-rt, does not)
printf 'int LLVMFuzzerTestOneInput(const char *d, unsigned long n) { (void)d; (void)n; return 0; }\n' >"$TMP/probe.c"
if ! command -v clang >/dev/null 2>&1 || ! clang -fsanitize=fuzzer "$TMP/probe.c" -o "$TMP/probe" >/dev/null 2>&1; then
    echo "not ok - fuzzing the GGUF loader needs clang with libFuzzer (apt-get install clang and, on Debian, libclang-rt-N-dev for clang N; scripts/install-deps.sh --tests installs both)"
    exit 0
fi
if ! $MAKE --no-print-directory -s B="$B" "$FUZZ" >"$TMP/fbuild.log" 2>&1 || [ ! -x "$FUZZ" ]; then
    echo "not ok - the GGUF fuzz target builds with clang -fsanitize=fuzzer,address,undefined: $(tail -n 2 "$TMP/fbuild.log" | tr '\n' ' ')"
    exit 1
fi
# seed corpus: the hand-made files of test_gguf (valid variants) and two tiny llamas
mkdir -p "$TMP/corpus"
if ! "$TEST" --write-seeds "$TMP/corpus" >/dev/null || ! "$TEST" --write-tiny "$TMP/corpus/tiny.gguf" >/dev/null; then
    echo "not ok - test_gguf writes the fuzz seed corpus"
    exit 1
fi
fuzz=$(cd "$(dirname "$FUZZ")" && pwd)/$(basename "$FUZZ")
(cd "$TMP" && timeout $((FUZZ_SECONDS + 60)) "$fuzz" -max_total_time="$FUZZ_SECONDS" corpus >"$TMP/fuzz.log" 2>&1)
rc=$?
runs=$(grep -oE '#[0-9]+' "$TMP/fuzz.log" | tail -n 1)
if [ $rc = 0 ]; then
    echo "ok - fuzzing the GGUF reader and tokenizer for ${FUZZ_SECONDS} s: no crash, leak or sanitizer report (${runs:-?} inputs)"
else
    # keep the input that broke it
    for f in "$TMP"/crash-* "$TMP"/leak-* "$TMP"/timeout-* "$TMP"/oom-*; do [ -f "$f" ] && cp "$f" "$B/tools/"; done
    echo "not ok - fuzzing the GGUF reader (exit $rc): $(grep -m1 -E 'ERROR|SUMMARY|deadly' "$TMP/fuzz.log") (input kept in $B/tools/)"
fi
exit 0

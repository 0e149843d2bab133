#!/usr/bin/env bash
# student-object.sh - compile a student's lab files into one object the player can link
# with, or refuse them. Called by the Makefile's driver rule (make driver / make lab-N).
#
#   grader/tools/student-object.sh OUT.o PUBLIC.syms API.syms -- CC CFLAGS... -- SRC.c...
#
# Allow-lists, never deny-lists (docs/grader.md, "The student's object"):
#  1. each source is compiled with the PUBLIC include path only (no internal headers);
#  2. the merged object may call only
#       - the harness's public functions (PUBLIC.syms: every pl_/kern_/ds_/gpt_/llm_
#         function a public header declares, but the file readers),
#       - the functions its lab's headers declare (the lab's API and the kit's helpers
#         for it, e.g. ls_load),
#       - libm, and the short list of pure C library functions below (memory, strings,
#         sorting, formatting into buffers or stdout/stderr, the compiler's helpers);
#     anything else is refused with a line "forbidden: <file> calls <symbol> ..." (the
#     grading engine classifies the build "forbidden");
#  3. its sections are code, read-only data, data, bss, debug information and the
#     assembler's bookkeeping only: no constructor, destructor, .init or .fini code, no
#     thread-local data, no section the loader would run or treat specially; no GNU
#     indirect function (its resolver runs when the program is loaded);
#  4. no raw system-call instruction;
#  5. the objects are merged (ld -r) and every global symbol that is not the lab's API
#     (API.syms: what the kit's untouched starter defines, grader/api/) is made local, so
#     nothing the student defines can replace a function of the driver, the harness or
#     the C library.
set -u
out=$1 public=$2 api=$3
shift 3
[ "${1:-}" = -- ] || { echo "usage: student-object.sh OUT PUBLIC API -- CC FLAGS -- SRC..." >&2; exit 2; }
shift
cc=() srcs=()
while [ $# -gt 0 ] && [ "$1" != -- ]; do cc+=("$1"); shift; done
[ $# -gt 0 ] && shift
srcs=("$@")
dir=$out.d
rm -rf "$dir"
mkdir -p "$dir"

# What a lab's code may call besides the kit: grader/tools/allowed-calls.txt.
allowed=" $(grep -v '^#' "$(dirname "$0")/allowed-calls.txt" | tr '\n' ' ') "
section_ok_re='^\.(text|rodata|data|bss)(\..*)?$|^\.debug_|^\.zdebug_|^\.(comment|note\.GNU-stack|note\.gnu\.property|eh_frame|group|symtab|strtab|shstrtab|llvm_addrsig)$|^\.rela?\.(text|rodata|data|eh_frame|debug_)'

# The lab's headers name its API and the kit's helpers a student may call: the words of
# their code, never of their comments (a C library name in a comment is not an invitation),
# which the compiler strips without expanding anything (-fpreprocessed).
labdir=
for a in "${cc[@]}"; do case $a in -Ilabs/*) labdir=${a#-I} ;; esac; done
header_names=" $(for h in "$labdir"/*.h; do [ -f "$h" ] && "${cc[0]}" -fpreprocessed -dD -E -P -x c "$h"; done 2>/dev/null |
    grep -oE '\b[A-Za-z_][A-Za-z0-9_]*\b' | sort -u | tr '\n' ' ') "

status=0
objs=()
for src in "${srcs[@]}"; do
    obj=$dir/${#objs[@]}-$(basename "${src%.c}").o
    "${cc[@]}" -c "$src" -o "$obj" || exit 1
    objs+=("$obj")
    why=()
    while read -r name; do
        [ -n "$name" ] || continue
        [[ $name =~ $section_ok_re ]] || why+=("has the section $name (only code, data and debug information: nothing the loader runs or treats specially)")
    done < <(readelf -S --wide "$obj" | sed -n 's/^ *\[ *[0-9]*\] \([^ ]*\) .*/\1/p' | grep -v '^$' | grep -v '^NULL$')
    if nm --format=posix "$obj" | awk '$2 == "i"' | grep -q .; then
        why+=("defines a GNU indirect function (its resolver would run when the program is loaded)")
    fi
    common=$(nm --format=posix "$obj" | awk '$2 == "C" {print $1}' | head -n 3 | tr '\n' ' ')
    if [ -n "$common" ]; then  # the linker would merge it with any global of that name
        why+=("has common symbols (${common% }): give each a definition (= 0) or make it static")
    fi
    if readelf -SW "$obj" | grep -F '.note.GNU-stack' | grep -q ' X '; then
        why+=("asks for an executable stack (a nested function's trampoline): take the function out of its parent")
    fi
    if objdump -d "$obj" | grep -Eq $'\t(syscall|sysenter|int +\\$0x80)\\b'; then
        why+=("holds a raw system-call instruction")
    fi
    for w in "${why[@]}"; do
        echo "forbidden: $src $w"
        status=1
    done
done
[ $status -eq 0 ] || exit 1

if [ ${#objs[@]} -eq 0 ]; then
    # a lab without student files (Lab 0): an empty object
    echo "" | "${cc[@]}" -x c -c - -o "$out" || exit 1
    exit 0
fi
ld -r -o "$dir/merged.o" "${objs[@]}" || exit 1
# What the merged object still needs from outside: the allow-lists above, or refused.
while read -r sym; do
    [ -n "$sym" ] || continue
    if grep -qx "$sym" "$public" || [[ "$allowed" == *" $sym "* ]] || [[ "$header_names" == *" $sym "* ]]; then
        continue
    fi
    # which file calls it, for the message
    who=${srcs[0]}
    for i in "${!objs[@]}"; do
        if nm -u --format=posix "${objs[$i]}" | awk '{print $1}' | sed 's/@.*//' | grep -qx "$sym"; then who=${srcs[$i]}; break; fi
    done
    case $sym in
    MPI_* | PMPI_* | ompi_* | nccl* | cuda* | cublas* | cu[A-Z]*)
        echo "forbidden: $who calls $sym (MPI, NCCL or CUDA directly: use the harness's pl_ calls)" ;;
    pl_* | kern_* | ds_* | gpt_* | llm_* | drv_* | plc_*)
        echo "forbidden: $who calls $sym (an internal function of the harness or the grader: only the public API is allowed)" ;;
    *)
        echo "forbidden: $who calls $sym (not on the list of what a lab may call: the harness's public API, libm and pure C library functions; docs/grader.md)" ;;
    esac
    status=1
done < <(nm -u --format=posix "$dir/merged.o" | awk '{print $1}' | sed 's/@.*//' | sort -u)
[ $status -eq 0 ] || exit 1
# The sanitizer flavour (make SANITIZE=address): every check above ran on the plain objects
# (a sanitizer adds a constructor and calls of its own); what is merged is the same sources
# compiled with the sanitizer as well.
if [ -n "${PL_SANITIZE_CFLAGS:-}" ]; then
    for i in "${!srcs[@]}"; do
        # shellcheck disable=SC2086
        "${cc[@]}" $PL_SANITIZE_CFLAGS -c "${srcs[$i]}" -o "${objs[$i]}" || exit 1
    done
    ld -r -o "$dir/merged.o" "${objs[@]}" || exit 1
fi
objcopy --keep-global-symbols="$api" "$dir/merged.o" "$out" || exit 1
rm -rf "$dir"

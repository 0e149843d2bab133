#!/usr/bin/env bash
# doctor.sh - one screen that says what works on this machine for ParaLab: compilers, MPI
# launch, libraries, GPUs, CUDA driver vs toolkit, NCCL, and which backends `auto` picks.
#
# Called by `make doctor` with MPIRUN, NVCC and CUDA_HOME from the Makefile; runs on its own
# too. Exit status: 0 when the CPU path (gcc, mpicc, mpirun, OpenBLAS, cJSON, zlib) works,
# 1 otherwise. GPU findings never change the exit status: the CPU path is what every lab needs.
set -u

MPIRUN=${MPIRUN:-mpirun}
read -r -a MPIRUN_WORDS <<<"$MPIRUN"
NP_TEST=4
LAUNCH_TIMEOUT=20

# --- output -------------------------------------------------------------------------------
if [[ -t 1 && "${TERM:-dumb}" != dumb && -z "${NO_COLOR:-}" ]]; then
    C_OK=$'\e[32m' C_BAD=$'\e[31m' C_WARN=$'\e[33m' C_DIM=$'\e[2m' C_BOLD=$'\e[1m' C_END=$'\e[0m'
else
    C_OK='' C_BAD='' C_WARN='' C_DIM='' C_BOLD='' C_END=''
fi
cpu_ok=1
ok() { printf '  %s[ok]%s %-10s %s\n' "$C_OK" "$C_END" "$1" "$2"; }
absent() { printf '  %s[--]%s %-10s %s\n' "$C_DIM" "$C_END" "$1" "$2"; }
warn() { printf '  %s[!!]%s %-10s %s\n' "$C_WARN" "$C_END" "$1" "$2"; }
fail() { printf '  %s[XX]%s %-10s %s\n' "$C_BAD" "$C_END" "$1" "$2"; cpu_ok=0; }
more() { printf '  %15s%s\n' "" "$1"; }
section() { printf '%s%s%s\n' "$C_BOLD" "$1" "$C_END"; }

# "13.0" -> 13000, "12.4" -> 12004: comparable integers.
version_code() { local maj=${1%%.*} min=${1#*.}; min=${min%%.*}; echo $((maj * 1000 + min)); }

section "ParaLab doctor: what works on $(hostname 2>/dev/null || echo this machine)"

# --- compilers ------------------------------------------------------------------------------
section "compilers"
if command -v gcc >/dev/null 2>&1; then
    ok gcc "$(gcc --version 2>/dev/null | head -n1)"
else
    fail gcc "not found: install gcc (scripts/install-deps.sh)"
fi
MPICC=mpicc
[[ "${MPIRUN_WORDS[0]}" == */* ]] && MPICC="$(dirname "${MPIRUN_WORDS[0]}")/mpicc"
if command -v "$MPICC" >/dev/null 2>&1; then
    ok mpicc "$("$MPICC" --showme:version 2>/dev/null | sed 's/^mpicc: //'), wraps $("$MPICC" --version 2>/dev/null | head -n1)"
else
    fail mpicc "not found: install libopenmpi-dev (scripts/install-deps.sh) or set MPI_HOME="
fi
NVCC=${NVCC:-}
CUDA_HOME=${CUDA_HOME:-}
[[ -z "$NVCC" && -n "$CUDA_HOME" && -x "$CUDA_HOME/bin/nvcc" ]] && NVCC="$CUDA_HOME/bin/nvcc"
[[ -z "$NVCC" ]] && NVCC=$(command -v nvcc 2>/dev/null || true)
[[ -z "$NVCC" && -x /usr/local/cuda/bin/nvcc ]] && NVCC=/usr/local/cuda/bin/nvcc
toolkit=""
if [[ -n "${NO_CUDA:-}" ]]; then
    absent nvcc "skipped (NO_CUDA=1): the cpu flavour only"
    NVCC=""
elif [[ -n "$NVCC" && -x "$NVCC" ]]; then
    toolkit=$("$NVCC" --version 2>/dev/null | sed -n 's/.*release \([0-9]*\.[0-9]*\).*/\1/p' | head -n1)
    ok nvcc "CUDA toolkit ${toolkit:-?} ($NVCC): the cuda flavour builds"
    [[ -z "$CUDA_HOME" ]] && CUDA_HOME=$(dirname "$(dirname "$NVCC")")
else
    absent nvcc "not found: the cpu flavour only (set CUDA_HOME= if CUDA is installed elsewhere)"
    NVCC=""
fi

# --- MPI ------------------------------------------------------------------------------------
section "MPI"
cores=$(nproc 2>/dev/null || echo 1)
if ! command -v "${MPIRUN_WORDS[0]}" >/dev/null 2>&1; then
    fail mpirun "'${MPIRUN_WORDS[0]}' not found: install openmpi-bin or set MPI_HOME="
else
    mpi_version=$("${MPIRUN_WORDS[@]}" --version 2>&1 | head -n1)
    case "$mpi_version" in
        *"Open MPI"*) ok "Open MPI" "${mpi_version##* } (${MPIRUN_WORDS[0]})" ;;
        *) warn MPI "'$mpi_version': not Open MPI; ParaLab is tested with Open MPI 4.1+" ;;
    esac

    # Try the launch as configured; on a known refusal, retry with the fix and say so.
    fixes=()
    launch_ok=0
    for _ in 1 2 3; do
        # each rank says its host and its rank (Open MPI's, Slurm's or PMIx's variable)
        out=$(env ${fixes[@]+"${fixes[@]}"} timeout "$LAUNCH_TIMEOUT" "${MPIRUN_WORDS[@]}" -np "$NP_TEST" \
            sh -c 'echo "$(hostname) ${OMPI_COMM_WORLD_RANK:-${SLURM_PROCID:-${PMIX_RANK:-?}}}"' 2>&1)
        rc=$?
        lines=$(grep -cv '^\s*$' <<<"$out")
        if [[ $rc -eq 0 && $lines -ge $NP_TEST ]]; then
            launch_ok=1
            break
        fi
        if [[ $rc -eq 124 ]]; then break; fi
        if grep -qi 'run.*as root\|allow-run-as-root' <<<"$out" &&
            [[ " ${fixes[*]} " != *OMPI_ALLOW_RUN_AS_ROOT=1* ]]; then
            fixes+=(OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1)
        elif grep -qi 'not enough slots\|oversubscribe' <<<"$out" &&
            [[ " ${fixes[*]} " != *rmaps_base_oversubscribe* ]]; then
            fixes+=(OMPI_MCA_rmaps_base_oversubscribe=1)
        else
            break
        fi
    done
    hosts=$(awk 'NF == 2 {print $1}' <<<"$out" | sort -u | grep -cv '^\s*$')
    if ((launch_ok)) && ((${#fixes[@]} == 0)); then
        ok launch "'$MPIRUN -np $NP_TEST hostname': $NP_TEST ranks on $hosts host(s)"
    elif ((launch_ok)); then
        ok launch "'$MPIRUN -np $NP_TEST hostname': $NP_TEST ranks on $hosts host(s), once this is set:"
        more "${fixes[*]}"
        [[ " ${fixes[*]} " == *ALLOW_RUN_AS_ROOT* ]] &&
            more "you are root: Open MPI refuses root unless OMPI_ALLOW_RUN_AS_ROOT=1 and _CONFIRM=1 are set"
        more "\`make\` exports these; export them yourself to call mpirun by hand"
    elif [[ $rc -eq 124 ]]; then
        fail launch "'$MPIRUN -np $NP_TEST hostname' hung for ${LAUNCH_TIMEOUT} s"
        more "often a network interface MPI cannot use: try OMPI_MCA_btl_tcp_if_include=lo OMPI_MCA_oob_tcp_if_include=lo"
    else
        fail launch "'$MPIRUN -np $NP_TEST hostname' failed (exit $rc): $(grep -v '^[-\s]*$' <<<"$out" | head -n1)"
        if [[ $(id -u) -eq 0 && -z "${OMPI_ALLOW_RUN_AS_ROOT:-}" ]]; then
            more "as root, Open MPI also needs OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1"
        fi
    fi
    if ((launch_ok)) && ((hosts > 1)); then
        # which ranks share a host (their messages stay in memory) and which talk over the network
        while read -r h ranks; do more "on $h: ranks $ranks"; done < <(sort -k2,2n <<<"$out" | awk 'NF == 2 {r[$1] = r[$1] " " $2} END {for (h in r) print h, r[h]}' | sort)
        more "pairs of ranks on one host share memory; the others cross the network"
        if [[ -n "${PL_ENGINE_ADDR:-}" ]]; then
            more "graded runs: the nodes report to PL_ENGINE_ADDR=$PL_ENGINE_ADDR"
        else
            warn engine "graded runs across hosts need PL_ENGINE_ADDR= an address of this machine the nodes reach (docs/setup.md, Several nodes)"
        fi
    fi
    if ((cores < NP_TEST)); then
        more "$cores core(s) for $NP_TEST ranks: oversubscribed. Results stay correct; times are not meaningful."
        more "Open MPI starts more ranks than cores only with OMPI_MCA_rmaps_base_oversubscribe=1 (make sets it)"
    fi
fi

# --- libraries ------------------------------------------------------------------------------
section "libraries"
CC_PROBE=$(command -v cc || command -v gcc || echo cc)
probe() { # header, link flag: a one-line test compile and link
    printf '#include <%s>\nint main(void){return 0;}\n' "$1" |
        "$CC_PROBE" -x c - -o /dev/null "$2" >/dev/null 2>&1
}
library() { # name, header, link flag, package
    if probe "$2" "$3"; then ok "$1" "$2 and $3"; else fail "$1" "$2 or $3 missing: install $4"; fi
}
library OpenBLAS cblas.h -lopenblas libopenblas-dev
library cJSON cjson/cJSON.h -lcjson libcjson-dev
library zlib zlib.h -lz zlib1g-dev
if command -v gnuplot >/dev/null 2>&1; then
    ok gnuplot "$(gnuplot --version 2>/dev/null | head -n1)"
else
    absent gnuplot "not found: plots are skipped (optional; install gnuplot-nox)"
fi

# --- GPUs, CUDA, NCCL ---------------------------------------------------------------------
section "GPUs"
gpus=0
driver_cuda=""
if command -v nvidia-smi >/dev/null 2>&1; then
    if gpu_list=$(nvidia-smi -L 2>&1) && grep -q '^GPU' <<<"$gpu_list"; then
        gpus=$(grep -c '^GPU' <<<"$gpu_list")
        header=$(nvidia-smi 2>/dev/null | head -n 5)
        driver_cuda=$(sed -n 's/.*CUDA Version: *\([0-9]*\.[0-9]*\).*/\1/p' <<<"$header" | head -n1)
        driver_ver=$(sed -n 's/.*Driver Version: *\([0-9.]*\).*/\1/p' <<<"$header" | head -n1)
        ok GPUs "$gpus visible (driver ${driver_ver:-?}, supports CUDA ${driver_cuda:-?})"
        while IFS= read -r l; do more "${l% (UUID*}"; done < <(grep '^GPU' <<<"$gpu_list" | head -n 8)
        ((gpus > 8)) && more "... and $((gpus - 8)) more"
        [[ -n "${CUDA_VISIBLE_DEVICES:-}" ]] && more "CUDA_VISIBLE_DEVICES=$CUDA_VISIBLE_DEVICES limits what the ranks see"
    else
        absent GPUs "nvidia-smi fails: $(head -n1 <<<"$gpu_list") (no NVIDIA driver loaded / no GPU)"
    fi
else
    absent GPUs "no NVIDIA driver / no GPU (nvidia-smi not found)"
fi

cuda_usable=0
if [[ -n "$toolkit" && -n "$driver_cuda" ]]; then
    dcode=$(version_code "$driver_cuda")
    tcode=$(version_code "$toolkit")
    if ((dcode >= tcode)); then
        ok CUDA "driver supports CUDA $driver_cuda, toolkit is $toolkit"
        cuda_usable=1
    elif ((dcode / 1000 == tcode / 1000)); then
        warn CUDA "driver supports CUDA $driver_cuda, toolkit is $toolkit: runs by minor-version compatibility"
        more "(the build has code for your GPU's architecture; PTX JIT and the newest features need a newer driver)"
        cuda_usable=1
    else
        warn CUDA "CUDA driver version is insufficient for this toolkit: driver supports CUDA $driver_cuda, toolkit is $toolkit — the CUDA backend will not run; update the driver or use an older toolkit (CPU backend still works)"
    fi
elif [[ -n "$toolkit" ]]; then
    absent CUDA "toolkit $toolkit, no driver: CUDA code compiles, nothing CUDA runs here"
elif [[ -n "$driver_cuda" ]]; then
    absent CUDA "driver supports CUDA $driver_cuda, but no toolkit (nvcc): install CUDA or set CUDA_HOME="
else
    absent CUDA "no driver, no toolkit"
fi

nccl_h=""
for d in ${CUDA_HOME:+"$CUDA_HOME/include"} /usr/include /usr/local/include; do
    [[ -f "$d/nccl.h" ]] && { nccl_h="$d/nccl.h"; break; }
done
nccl_ver=""
if [[ -n "${NO_NCCL:-}" ]]; then
    absent NCCL "skipped (NO_NCCL=1)"
elif [[ -n "$nccl_h" ]]; then
    nccl_def() { sed -n "s/^#define NCCL_$1 *\([0-9]*\).*/\1/p" "$nccl_h" | head -n1; }
    nccl_ver="$(nccl_def MAJOR).$(nccl_def MINOR).$(nccl_def PATCH)"
    lib=$(ldconfig -p 2>/dev/null | grep -o '/[^ ]*libnccl\.so\.[0-9]*' | head -n1)
    [[ -z "$lib" && -n "$CUDA_HOME" ]] && lib=$(find "$CUDA_HOME"/lib* -name 'libnccl.so.*' 2>/dev/null | head -n1)
    if [[ -n "$NVCC" ]]; then
        ok NCCL "$nccl_ver headers ($nccl_h), library ${lib:-not found by ldconfig}"
    else
        absent NCCL "$nccl_ver headers ($nccl_h), unused: the cuda flavour needs nvcc"
    fi
else
    absent NCCL "nccl.h not found in ${CUDA_HOME:+$CUDA_HOME/include, }/usr/include: comm nccl is not built"
fi

# --- what `auto` picks (mirrors choose_device/choose_comm in common/pl_runtime.c) ----------
section "backends (--device auto --comm auto)"
nccl_multi=0
if [[ -n "$nccl_ver" ]]; then
    IFS=. read -r nmaj nmin _ <<<"$nccl_ver"
    ((nmaj > 2 || (nmaj == 2 && nmin >= 30))) && nccl_multi=1
fi
if [[ -z "$NVCC" ]]; then
    printf '  -> cpu + mpi: no nvcc, so no cuda flavour is built (every lab still runs)\n'
elif ((gpus == 0)); then
    printf '  -> cpu + mpi: no GPU visible (the cuda flavour builds but falls back to cpu)\n'
elif ((!cuda_usable)); then
    printf '  -> cpu + mpi: the driver is too old for the toolkit, so no rank can use a GPU\n'
elif [[ -z "$nccl_ver" ]]; then
    printf '  -> cuda + mpi at any NP: GPUs usable, but this build has no NCCL\n'
else
    if ((gpus > 1)); then
        printf '  -> cuda + nccl for NP 1..%d on one node: every rank has a GPU of its own\n' "$gpus"
    else
        printf '  -> cuda + nccl for NP 1: the rank has the GPU to itself\n'
    fi
    printf '  -> cuda + mpi  for NP > %d: ranks share GPUs, and NCCL refuses two ranks on one GPU\n' "$gpus"
    if ((nccl_multi)); then
        printf '     (NCCL %s: --comm nccl with NCCL_MULTI_RANK_GPU_ENABLE=1 allows up to 2 ranks per GPU)\n' "$nccl_ver"
    else
        printf '     (that changes with NCCL 2.30: NCCL_MULTI_RANK_GPU_ENABLE=1 allows 2 ranks per GPU)\n'
    fi
fi
printf '     override with --device/--comm, PL_DEVICE/PL_COMM, or make DEVICE=cpu COMM=mpi\n'

# --- symmetric memory (mirrors choose() in common/pl_sym.c) --------------------------------
section "symmetric memory (Lab 9, pl_sym.h)"
nvshmem_home=${NVSHMEM_HOME:-$(cd "$(dirname "$0")/.." && pwd)/.devdeps/nvshmem/nvidia/nvshmem}
nvshmem_ver=""
if [[ -f "$nvshmem_home/include/non_abi/nvshmem_version.h" ]]; then
    nvv() { sed -n "s/^#define NVSHMEM_VENDOR_$1_VERSION *\([0-9]*\).*/\1/p" "$nvshmem_home/include/non_abi/nvshmem_version.h" | head -n1; }
    nvshmem_ver="$(nvv MAJOR).$(nvv MINOR).$(nvv PATCH)"
fi
if [[ -n "$nvshmem_ver" && -n "$NVCC" && -z "${NO_NVSHMEM:-}" ]]; then
    ok NVSHMEM "$nvshmem_ver ($nvshmem_home): the cuda flavour builds the nvshmem backend"
elif [[ -n "$nvshmem_ver" ]]; then
    absent NVSHMEM "$nvshmem_ver found, unused: the cuda flavour needs nvcc"
else
    absent NVSHMEM "not installed (scripts/install-deps.sh adds it on a machine with GPUs, or set NVSHMEM_HOME=)"
fi
printf '  -> cpu device: mpi-rma (MPI-3 windows; shared windows on one node, so peer pointers work)\n'
if [[ -n "$NVCC" ]] && ((gpus > 0 && cuda_usable)); then
    if [[ -n "$nvshmem_ver" ]]; then
        printf '  -> cuda device, NP 1..%d: nvshmem (every rank owns its GPU); NP > %d: cuda-ipc (ranks share GPUs)\n' "$gpus" "$gpus"
    else
        printf '  -> cuda device: cuda-ipc (IPC handles, stream-ordered signals; one node)\n'
    fi
fi
printf '     a run says which one it used: make lab-9 prints it; override with PL_SYM=mpi-rma|cuda-ipc|nvshmem\n'

# --- the grader's sandbox (grader/engine/contain.c, landlock.c) -------------------------------
section "the grader's sandbox (make grade, grade-class, Gradescope)"
root=$(cd "$(dirname "$0")/.." && pwd)
if ! command -v bwrap >/dev/null 2>&1; then
    absent bubblewrap "not installed (scripts/install-deps.sh installs it)"
elif bwrap --unshare-all --die-with-parent --ro-bind / / --dev /dev --proc /proc true >/dev/null 2>&1; then
    ok bubblewrap "starts a sandbox here: graded runs use it"
else
    absent bubblewrap "cannot start here (no user namespaces: a container, or kernel.unprivileged_userns_clone=0)"
fi
if [[ -x "$root/build/tools/pl-landlock" ]]; then
    if why=$("$root/build/tools/pl-landlock" --read / -- true 2>&1); then
        ok Landlock "available: where bubblewrap cannot start, graded runs and builds are confined by it"
    else
        absent Landlock "${why#pl-landlock: }"
    fi
else
    absent Landlock "not checked: build/tools/pl-landlock is not built yet (make)"
fi
printf '     where neither starts, make grade and the autograders refuse to grade (make lab-N grades unconfined, with a note)\n'

# --- summary --------------------------------------------------------------------------------
if ((cpu_ok)); then
    if ((gpus > 0 && cuda_usable)) && [[ -n "$NVCC" ]]; then
        printf '%ssummary: CPU path works; CUDA path available (%d GPU(s)). Next: make lab-0%s\n' "$C_OK" "$gpus" "$C_END"
    else
        printf '%ssummary: CPU path works (cpu + mpi); no CUDA path here. Next: make lab-0%s\n' "$C_OK" "$C_END"
    fi
    exit 0
fi
printf '%ssummary: the CPU path does not work yet: fix the [XX] lines (scripts/install-deps.sh helps)%s\n' "$C_BAD" "$C_END"
exit 1

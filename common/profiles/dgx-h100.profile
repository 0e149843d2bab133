# dgx-h100.profile - 8 H100 SXM GPUs on NVSwitch in one node (docs/cost-model.md).
# Numbers are round public figures: TF32 dense tensor-core peak, HBM3 bandwidth, and the
# all-reduce bus bandwidth NCCL typically reaches over NVLink 4 (about 360 GB/s).
name              dgx-h100
description       8x H100 SXM, NVLink 4 + NVSwitch, one node
gpus_per_node     8
nodes             1
peak_tflops       495       # TF32 tensor cores, dense
gemm_efficiency   0.6       # fraction of peak a large GEMM reaches
vector_tflops     67        # FP32 without tensor cores (elementwise kernels)
mem_bw_GBps       3350      # HBM3
launch_us         4         # kernel launch + small-op overhead
intra_latency_us  3         # per ring step over NVLink
intra_bw_GBps     360       # per GPU, one direction, as NCCL's busbw
inter_latency_us  8         # unused with one node; kept so every profile has every key
inter_bw_GBps     45
put_latency_us    1.5       # one-sided put + signal over NVLink, issued from the GPU (NVSHMEM)
put_bw_GBps       450       # NVLink 4 per GPU and direction (18 links x 25 GB/s), no protocol overhead
memory_GB         80        # H100 SXM 80 GB (the planner's memory limit)

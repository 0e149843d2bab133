# dgx-a100.profile - DGX A100 nodes: 8 A100 SXM 80 GB on NVSwitch (NVLink 3), one 200 Gb/s
# HDR InfiniBand adapter per GPU between nodes: the cluster of the Megatron-LM paper's
# Table 1 (Narayanan et al., SC21), up to its 3072 GPUs. Mixed precision (bf16): the peak
# and the element size are bf16's. One set of numbers for every row of the table; each
# with its source (docs/cost-model.md, "The planner"):
name              dgx-a100
description       384 nodes x 8 A100 SXM 80 GB, NVSwitch inside, 8x HDR 200 Gb/s InfiniBand between
gpus_per_node     8
nodes             384
peak_tflops       312       # bf16 dense tensor cores (A100 datasheet)
gemm_efficiency   0.86      # 267.9 of 312 TFLOP/s: the maximum achievable bf16 matmul measured on an
                            # A100 SXM (ml-engineering's MAMF table, CUDA 12.1); NVIDIA's cuBLAS 11
                            # plot shows 240-290 TFLOP/s for square GEMMs of 2048-8192
vector_tflops     19.5      # FP32 without tensor cores (A100 datasheet)
mem_bw_GBps       2039      # HBM2e, A100 80 GB SXM (datasheet)
launch_us         4         # kernel launch + small-op overhead, as the other profiles
intra_latency_us  3         # per ring step over NVLink, as dgx-h100
intra_bw_GBps     230       # per GPU, one direction, as NCCL's all-reduce busbw on NVLink 3 (600 GB/s
                            # bidirectional per GPU, 300 each way; nccl-tests reach about 230)
inter_latency_us  8         # per step through the NIC and the switch, as 2x8-ib
inter_bw_GBps     22.5      # 200 Gb/s = 25 GB/s line rate per GPU, 90% reached (the 2x8-ib rule)
memory_GB         80
element_bytes     2         # bf16 weights and activations; gradients and optimizer state in fp32
sm_count          108       # A100 SXM (datasheet). A GEMM's output is cut into tiles, one per SM at a
gemm_tile_m       256       # time, in whole waves of 108 (NVIDIA's Matrix Multiplication Background
gemm_tile_n       128       # guide: tile and wave quantisation; 256x128 is cuBLAS's most efficient
                            # tensor-core tile there): the planner prices each GEMM in whole waves

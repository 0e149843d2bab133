# 2x8-ib.profile - 2 nodes of 8 H100 SXM each (NVSwitch inside a node), one 400 Gb/s
# InfiniBand NDR adapter per GPU between nodes (docs/cost-model.md). A ring that crosses
# nodes runs at the inter-node rate.
name              2x8-ib
description       2 nodes x 8 H100 SXM, NVSwitch inside, 8x NDR 400 Gb/s InfiniBand between
gpus_per_node     8
nodes             2
peak_tflops       495
gemm_efficiency   0.6
vector_tflops     67
mem_bw_GBps       3350
launch_us         4
intra_latency_us  3
intra_bw_GBps     360
inter_latency_us  8         # per step through the NIC and the switch
inter_bw_GBps     45        # 400 Gb/s = 50 GB/s line rate, about 45 reached
memory_GB         80        # H100 SXM 80 GB (the planner's memory limit)

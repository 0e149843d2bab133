# pcie-4gpu.profile - 4 A100 PCIe GPUs in one workstation, no NVLink: traffic goes
# through PCIe 4.0 x16 switches and the host bridge (docs/cost-model.md).
name              pcie-4gpu
description       4x A100 PCIe, PCIe 4.0 x16, no NVLink
gpus_per_node     4
nodes             1
peak_tflops       156       # TF32 tensor cores, dense
gemm_efficiency   0.6
vector_tflops     19.5      # FP32 without tensor cores
mem_bw_GBps       1555      # HBM2e
launch_us         5
intra_latency_us  10        # PCIe peer-to-peer or through host memory
intra_bw_GBps     12        # ring busbw NCCL reaches over shared PCIe switches
inter_latency_us  10
inter_bw_GBps     12
memory_GB         40        # A100 PCIe 40 GB (the planner's memory limit)

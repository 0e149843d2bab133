# this-machine.profile - a ParaLab cost-model machine profile (docs/cost-model.md)
name              this-machine
description       calibrated: 2 rank(s) on 1 node(s), device cpu, comm mpi, 2 pair(s) fitted
gpus_per_node     2
nodes             1
peak_tflops       0.111615
gemm_efficiency   0.975908
vector_tflops     0.00215141
mem_bw_GBps       35.228
launch_us         0.149998
intra_latency_us  0.4745
intra_bw_GBps     5.57574
inter_latency_us  0.4745
inter_bw_GBps     5.57574

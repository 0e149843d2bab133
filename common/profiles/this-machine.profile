# this-machine.profile - a ParaLab cost-model machine profile (docs/cost-model.md)
name              this-machine
description       calibrated: 2 rank(s) on 1 node(s), device cpu, comm mpi, 2 pair(s) fitted
gpus_per_node     2
nodes             1
peak_tflops       0.111874
gemm_efficiency   1
mem_bw_GBps       31.3325
launch_us         0.14
intra_latency_us  0.404
intra_bw_GBps     4.00111
inter_latency_us  0.404
inter_bw_GBps     4.00111

calibrate --from-nccl-tests all_reduce_8xh20.log --profile h100x8

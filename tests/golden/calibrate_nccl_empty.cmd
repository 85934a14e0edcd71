calibrate --from-nccl-tests empty.log

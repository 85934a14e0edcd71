calibrate --from-nccl-tests all_reduce_4x4090.log --profile rtx4090x8

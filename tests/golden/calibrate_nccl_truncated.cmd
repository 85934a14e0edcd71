calibrate --from-nccl-tests truncated.log --profile rtx4090x8

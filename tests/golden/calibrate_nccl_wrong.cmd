calibrate --from-nccl-tests wrong.log --profile rtx4090x8

calibrate --from-nccl-tests failed.log --profile rtx4090x8

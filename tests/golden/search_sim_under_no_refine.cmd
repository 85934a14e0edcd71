search --model llama2-7b --cluster dgx-h100 --gpus 16 --global-batch 64 --seq 2048 --sim-under compass

search --model llama3-405b --cluster dgx-h100 --gpus 8 --global-batch 8 --seq 8192

search --model llama2-7b --cluster dgx-h100 --gpus 16 --global-batch 32 --seq 8192 --top 1

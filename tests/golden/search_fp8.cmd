search --model llama2-13b --cluster dgx-h100 --gpus 8 --global-batch 32 --seq 4096 --fp8 --top 2

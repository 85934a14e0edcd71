search --model llama3-8b --cluster dgx-h100 --gpus 16 --global-batch 16 --seq 16384 --cp 2 --top 3 --refine sim

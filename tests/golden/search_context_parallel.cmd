search --model llama3-8b --cluster dgx-h100 --gpus 16 --global-batch 16 --seq 16384 --max-cp 4 --top 3

search --model llama2-13b --cluster dgx-h100 --gpus 8 --global-batch 32 --seq 4096 --tp 2 --pp 2 --vpp 3 --mbs 2 --top 1

search --model llama2-13b --cluster a6000x8-2nic --gpus 32 --global-batch 128 --seq 4096 --tp 8 --pp 4 --top 3 --refine sim --sim-tp simulated --sim-under compass

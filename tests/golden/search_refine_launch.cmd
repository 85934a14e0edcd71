search --model llama2-13b --cluster ${SRC}/profiles/h100pcie-x8-gen5.json --gpus 8 --global-batch 32 --seq 4096 --top 4 --refine sim

export te --profile h100x8 --model llama2-70b --tp 4 --cp 2 --seq 8192 --fp8 --first-last-layers-bf16

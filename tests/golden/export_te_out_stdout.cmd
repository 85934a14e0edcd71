export te --profile h100x8 --model llama2-70b --tp 4 --out -

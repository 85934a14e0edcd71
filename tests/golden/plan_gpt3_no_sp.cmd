plan --model gpt3-6.7b --tp 4 --seq 2048 --no-sp

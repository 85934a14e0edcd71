export te --profile rtx4090x8 --tp 4

simulate --profile a6000x8 --op ag_gemm --m 4096 --n 4096 --k 4096 --tp 4 --strategy fuse:ring --links 2 --json

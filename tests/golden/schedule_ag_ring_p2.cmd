schedule --op ag_gemm --m 4 --n 4 --k 2 --tp 2 --strategy fuse:ring

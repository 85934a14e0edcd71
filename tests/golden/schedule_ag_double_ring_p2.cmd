schedule --op ag_gemm --m 6 --n 4 --k 3 --tp 2 --strategy fuse:double-ring

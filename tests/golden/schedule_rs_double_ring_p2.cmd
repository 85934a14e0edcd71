schedule --op gemm_rs --m 6 --n 3 --k 4 --tp 2 --strategy fuse:double-ring

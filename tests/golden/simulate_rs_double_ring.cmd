simulate --profile a6000x8 --op gemm_rs --m 4096 --n 4096 --k 4096 --tp 4 --strategy fuse:double-ring

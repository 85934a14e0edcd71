schedule --op gemm_rs --m 4 --n 3 --k 2 --tp 2 --strategy fuse:all2all

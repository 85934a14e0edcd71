run --op gemm_xx --m 16 --n 8 --k 8 --tp 2

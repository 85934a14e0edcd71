schedule --op gemm_rs --m 5 --n 4 --k 2 --tp 2

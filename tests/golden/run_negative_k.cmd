run --op gemm_rs --m 8 --n 8 --k -4 --tp 2

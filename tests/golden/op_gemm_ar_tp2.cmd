op --op gemm_ar --m 2048 --n 4096 --k 4096 --tp 2

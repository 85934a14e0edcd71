schedule --op gemm_ar --m 4 --n 3 --k 2 --tp 2

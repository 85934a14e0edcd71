run --op gemm_ar --m 8 --n 8 --k 8 --tp 0

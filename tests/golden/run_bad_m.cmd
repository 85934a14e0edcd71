run --op ag_gemm --m 0 --n 8 --k 8 --tp 2

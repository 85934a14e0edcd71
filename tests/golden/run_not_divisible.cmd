run --op ag_gemm --m 10 --n 8 --k 8 --tp 4

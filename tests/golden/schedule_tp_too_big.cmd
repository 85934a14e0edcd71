schedule --op ag_gemm --m 32 --n 32 --k 2 --tp 16

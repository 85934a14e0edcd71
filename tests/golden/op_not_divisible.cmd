op --op ag_gemm --m 1001 --n 1024 --k 1024 --tp 8

op --profile a6000x8 --op ag_gemm --m 8192 --n 15360 --k 5120 --tp 8

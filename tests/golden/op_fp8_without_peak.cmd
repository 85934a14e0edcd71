op --op ag_gemm --m 1024 --n 1024 --k 1024 --tp 2 --dtype fp8 --profile a6000x8

run --op ag_gemm --m 1048576 --n 1048576 --k 1048576 --tp 2

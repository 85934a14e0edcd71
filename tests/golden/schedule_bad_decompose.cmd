schedule --op ag_gemm --m 6 --n 4 --k 2 --tp 2 --strategy decompose:2

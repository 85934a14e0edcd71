run --backend cuda --launch bogus --op ag_gemm --m 16 --n 8 --k 8 --tp 2

run --backend cuda --launch env --sync flags --op ag_gemm --m 16 --n 8 --k 8 --tp 2 --strategy fuse:ring

op --op gemm_rs --m 4096 --n 5120 --k 13824 --tp 4 --json

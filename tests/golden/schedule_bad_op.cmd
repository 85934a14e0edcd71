schedule --op allgather --m 4 --n 4 --k 2 --tp 2
